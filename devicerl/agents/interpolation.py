"""Mixing a trained agent's weights with those of the agent it started from.

``(1 - alpha) * start + alpha * trained``, tensor by tensor (WiSE-FT, Wortsman et al. 2022:
a fine-tuned model interpolated with its start keeps more of the start's out-of-distribution
skill). It needs no training: train once, evaluate a few ``alpha`` on validation instances, keep
the best. On the unseen-tasks protocol alpha 0.25 kept the start's level on tasks never trained
on where the trained agents lost it (docs/benchmarks.md#unseen-tasks).

It works on saved agent folders, whatever the agent: every ``*.safetensors`` file of the trained
agent (the small agent's ``model.safetensors``, a LoRA policy's adapters, fusion layers) is mixed
with the start's file of the same name, and every other file (the agent's settings) is the
trained agent's. The two must be the same network: the same files, names and shapes.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from devicerl.errors import ConfigError, DataError, PathError


def _weights(folder: Path) -> list[Path]:
    return sorted(p.relative_to(folder) for p in folder.rglob("*.safetensors"))


def interpolate_agents(start: Path, trained: Path, alpha: float, out: Path) -> Path:
    """Save in `out` (a new folder) the agent of `trained` with every weight tensor
    ``(1 - alpha) * start + alpha * trained``; returns `out`. alpha 1 copies `trained` as it
    is. The folder appears whole or not at all."""
    import torch
    from safetensors import SafetensorError
    from safetensors.torch import load_file, save_file

    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"alpha must be between 0 and 1 (got {alpha})")
    if out.exists():
        raise PathError(f"{out}: already exists (give a new folder)")
    files = _weights(trained)
    if not files:
        raise DataError(f"{trained}: no *.safetensors weights to interpolate")
    if missing := [str(f) for f in files if not (start / f).is_file()]:
        raise DataError(f"{start}: lacks {missing[0]}: not the start of {trained}")
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    tmp = shutil.copytree(trained, work / "agent")
    try:
        for f in files if alpha < 1.0 else ():
            try:
                a, b = load_file(str(start / f)), load_file(str(trained / f))
            except (OSError, SafetensorError) as e:
                raise DataError(f"{f}: cannot read weights ({e})") from None
            for k in sorted(set(a) | set(b)):
                if k not in a or k not in b or a[k].shape != b[k].shape:
                    raise DataError(
                        f"{f}: weight {k} differs between {start} and {trained}: not the same "
                        "network"
                    )
            mixed = {
                k: torch.lerp(a[k].double(), v.double(), alpha).to(v.dtype)
                if v.is_floating_point()
                else v
                for k, v in b.items()
            }
            save_file(mixed, str(tmp / f))
        tmp.rename(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out
