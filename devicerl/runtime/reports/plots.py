"""Learning-curve PNGs (matplotlib, headless) from ``metrics.jsonl`` records or the store.

- ``success.png``: every ``*/success_rate`` metric against env steps; when the run logged none,
  a rolling success rate computed from the stored episodes (truncated ones excluded).
- ``losses.png``: every metric whose name contains ``loss``.
- ``metrics-<namespace>.png``: the remaining metrics of each namespace (``pool``, ``train``, ...;
  at most `MAX_FIGURES` of them); a file name is made from the namespace (`safe_name`), never
  taken from it: metric names come from a run folder's data.
"""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from devicerl.files import safe_name, write_bytes

MAX_PANELS = 12
MAX_FIGURES = 24


def _series(records: Sequence[dict[str, Any]]) -> dict[str, tuple[list[int], list[float]]]:
    out: dict[str, tuple[list[int], list[float]]] = defaultdict(lambda: ([], []))
    for rec in records:
        for k, v in rec.items():
            if "/" in k and isinstance(v, (int, float)) and not isinstance(v, bool):
                out[k][0].append(int(rec["step"]))
                out[k][1].append(float(v))
    return dict(out)


def _figure(panels: dict[str, tuple[list[int], list[float]]], title: str, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    names = sorted(panels)[:MAX_PANELS]
    cols = min(3, len(names))
    rows = (len(names) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        xs, ys = panels[name]
        ax.plot(xs, ys, marker="." if len(xs) < 30 else None, linewidth=1.2)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("env steps", fontsize=8)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return write_bytes(path, buf.getvalue())


def success_from_episodes(index: Any, window: int | None = None) -> tuple[list[int], list[float]]:
    """Rolling success rate against cumulative env steps, from a store index (write order)."""
    reasons = index.column("end_reason").to_pylist()
    steps = index.column("num_steps").to_pylist()
    success = index.column("success").to_pylist()
    kept = [(n, s) for n, s, r in zip(steps, success, reasons) if r != "truncated"]
    if not kept:
        return [], []
    w = window or max(10, len(kept) // 20)
    xs, ys, total, recent = [], [], 0, []
    for n, s in kept:
        total += n
        recent = [*recent[-(w - 1) :], float(s)] if w > 1 else [float(s)]
        xs.append(total)
        ys.append(sum(recent) / len(recent))
    return xs, ys


def learning_curves(
    records: Sequence[dict[str, Any]], out_dir: str | Path, index: Any = None
) -> list[Path]:
    """Write the curve PNGs into ``out_dir``; returns their paths (none when nothing to plot)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    series = _series(records)
    written = []
    success = {k: v for k, v in series.items() if k.endswith("success_rate")}
    if not success and index is not None and index.num_rows:
        xs, ys = success_from_episodes(index)
        if xs:
            success = {"episodes/success_rate (rolling, from trajectories)": (xs, ys)}
    if success:
        written.append(_figure(success, "success rate", out / "success.png"))
    losses = {k: v for k, v in series.items() if "loss" in k}
    if losses:
        written.append(_figure(losses, "losses", out / "losses.png"))
    rest: dict[str, dict[str, tuple[list[int], list[float]]]] = defaultdict(dict)
    for k, v in series.items():
        if k not in success and k not in losses:
            rest[k.split("/", 1)[0]][k] = v
    for ns, panels in sorted(rest.items())[:MAX_FIGURES]:
        name = ns if ns.isalnum() and len(ns) <= 32 else safe_name(ns, max_len=40)
        written.append(_figure(panels, ns, out / f"metrics-{name}.png"))
    return written
