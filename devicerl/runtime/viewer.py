"""`build_report`: a static HTML report of a run (``devicerl view RUN_DIR``).

One folder (``RUN/report/`` by default) with ``index.html``, ``img/`` (screenshots, JPEG,
downscaled) and ``curves/`` (learning-curve PNGs). For each episode (newest first, at most
``max_episodes``): every screenshot with the action drawn over it in SVG (a circle for a tap,
an arrow for a swipe), the action, reward, the judge's verdict and the model's text; filters by
task and outcome in a few lines of inline JavaScript. No server and no network are needed:
open ``index.html`` in a browser.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import string
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devicerl.actions import Action, ActionType
from devicerl.secrets import scrub

if TYPE_CHECKING:  # the heavy modules load in build_report, so `devicerl --help` stays fast
    import numpy as np

    from devicerl.records import Observation, Trajectory


@dataclass
class ViewConfig:
    """Options of `devicerl view`."""

    max_episodes: int = field(
        default=200, metadata={"help": "show the newest N episodes (0: all)", "min": 0}
    )
    image_max_side: int = field(
        default=720,
        metadata={"help": "downscale screenshots to at most this many pixels", "min": 16},
    )
    image_quality: int = field(
        default=85, metadata={"help": "JPEG quality of report images", "min": 1, "max": 95}
    )
    curves: bool = field(default=True, metadata={"help": "draw learning-curve PNGs"})
    skip_bad: bool = field(
        default=True, metadata={"help": "skip corrupt shards with a warning instead of failing"}
    )


@dataclass
class Report:
    """What `build_report` wrote."""

    path: Path
    episodes_shown: int
    episodes_total: int
    curves: list[Path]
    bad_shards: dict[Path, str]


#: Every outcome label, listed in the filter even when no episode has it yet.
OUTCOMES = ("success", "failure", "agent_ended", "max_steps", "truncated")  # EndReason values


def outcome(t: Trajectory) -> str:
    """The label the filters use: 'success', or the end reason of a non-successful episode."""
    if t.success:
        return "success"
    return t.end_reason.value if t.end_reason is not None else "running"


class _Images:
    """Writes screenshots as downscaled JPEGs, once per distinct array of an episode."""

    def __init__(self, folder: Path, max_side: int, quality: int) -> None:
        self.folder, self.max_side, self.quality = folder, max_side, quality
        self.folder.mkdir(parents=True, exist_ok=True)

    def write(self, pixels: np.ndarray, name: str) -> tuple[str, int, int]:
        from PIL import Image

        img = Image.fromarray(pixels)
        img.thumbnail((self.max_side, self.max_side))
        img.save(self.folder / name, format="JPEG", quality=self.quality)
        return f"{self.folder.name}/{name}", pixels.shape[1], pixels.shape[0]


def _marks(action: Action | None, w: float, h: float) -> str:
    if action is None or action.type is not ActionType.DUAL_POINT:
        return ""
    assert action.touch is not None and action.lift is not None
    (x0, y0), (x1, y1) = action.touch, action.lift
    r = 0.025 * max(w, h)
    if action.is_tap:
        return f'<circle class="tap" cx="{x0 * w:.1f}" cy="{y0 * h:.1f}" r="{r:.1f}"/>'
    return (
        f'<circle class="swipe-start" cx="{x0 * w:.1f}" cy="{y0 * h:.1f}" r="{r * 0.6:.1f}"/>'
        f'<line class="swipe" x1="{x0 * w:.1f}" y1="{y0 * h:.1f}" x2="{x1 * w:.1f}" '
        f'y2="{y1 * h:.1f}" stroke-width="{r * 0.35:.1f}" marker-end="url(#arrow)"/>'
    )


def _screen(obs: Observation, image: tuple[str, int, int] | None, action: Action | None) -> str:
    if image is not None:
        src, w, h = image
        body = f'<img src="{html.escape(src)}" alt="screenshot" loading="lazy">'
    else:
        w, h = obs.screen_size if min(obs.screen_size) > 0 else (9, 16)
        body = '<div class="noshot">no screenshot</div>'
    svg = f'<svg class="marks" viewBox="0 0 {w} {h}" preserveAspectRatio="none">'
    marks = _marks(action, w, h)
    return f'<div class="shot" style="aspect-ratio:{w}/{h}">{body}{svg}{marks}</svg></div>'


def _kv(d: dict[str, Any] | None) -> str:
    if not d:
        return ""
    items = "".join(
        f"<span><b>{html.escape(str(k))}</b> {html.escape(_short(v))}</span>" for k, v in d.items()
    )
    return f'<div class="verdict">verdict: {items}</div>'


def _short(v: Any, limit: int = 300) -> str:
    s = v if isinstance(v, str) else json.dumps(v, default=str)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _step_html(i: int, t: Trajectory, images: list[tuple[str, int, int] | None]) -> str:
    s = t.steps[i]
    output = html.escape(s.text or "")
    text = f"<details><summary>model output</summary><pre>{output}</pre></details>"
    caption = (
        f'<b>{i}</b> <span class="act">{html.escape(s.action.describe())}</span> '
        f'<span class="reward">r={s.reward:g}</span>'
        + (
            f' <span class="invalid">{html.escape(s.info["invalid_action"])}</span>'
            if s.info.get("invalid_action")
            else ""
        )
        + _kv(s.verdict)
        + (text if s.text else "")
    )
    screen = _screen(s.observation, images[i], s.action)
    return f'<figure class="step">{screen}<figcaption>{caption}</figcaption></figure>'


def _episode_html(t: Trajectory, images: list[tuple[str, int, int] | None]) -> str:
    label = outcome(t)
    steps = "".join(_step_html(i, t, images) for i in range(t.length))
    if t.final_observation is not None:
        final = _screen(t.final_observation, images[-1], None)
        steps += f'<figure class="step final">{final}<figcaption>final</figcaption></figure>'
    cause = f" ({html.escape(t.truncation_cause)})" if t.truncation_cause else ""
    verdict = _kv(t.extras.get("verdict")) if isinstance(t.extras.get("verdict"), dict) else ""
    # a league run: the policy that played it (a single-policy run's is "agent")
    policy = t.plan.policy if t.plan is not None and t.plan.policy != "agent" else None
    played = f"policy {html.escape(str(policy))}, " if policy else ""
    head = (
        f'<h2><span class="badge {label}">{label}</span>{cause} {html.escape(t.task)} '
        f"<small>{played}{t.length} steps, reward {t.total_reward:g}, seed {t.seed}, "
        f"episode {t.episode_id[:12]}</small></h2>"
        f'<p class="instr">{html.escape(t.instruction)}</p>{verdict}'
    )
    return (
        f'<section class="episode" data-task="{html.escape(t.task, quote=True)}" '
        f'data-outcome="{label}" data-episode="{t.episode_id}">{head}'
        f'<div class="steps">{steps}</div></section>'
    )


def _episode_images(t: Trajectory, images: _Images) -> list[tuple[str, int, int] | None]:
    """One entry per step plus one for the final observation."""
    observations = [s.observation for s in t.steps] + [t.final_observation]
    written: dict[int, tuple[str, int, int]] = {}
    out: list[tuple[str, int, int] | None] = []
    for i, obs in enumerate(observations):
        px = obs.screenshot if obs is not None else None
        if px is None:
            out.append(None)
            continue
        if id(px) not in written:
            written[id(px)] = images.write(px, f"{t.episode_id[:16]}-{i}.jpg")
        out.append(written[id(px)])
    return out


def build_report(
    run: str | Path, out: str | Path | None = None, config: ViewConfig | None = None
) -> Report:
    """Write the report of the run (or bare store) at ``run``; returns what was written.

    Each shard is read once (the episode index once), screenshots are decoded while earlier
    episodes are drawn on other threads (PIL releases the GIL), and a progress bar counts the
    episodes rendered.
    """
    from devicerl.data.store import TrajectoryStore
    from devicerl.runtime.plots import learning_curves
    from devicerl.runtime.progress import RateProgress
    from devicerl.runtime.run_dir import RunDir, find_store

    cfg = config or ViewConfig()
    run_dir = RunDir(run)
    out_dir = Path(out) if out is not None else run_dir.report
    store = TrajectoryStore(find_store(run), skip_bad=cfg.skip_bad)
    index = store.index()
    ids = index.column("episode_id").to_pylist()
    shown = ids[-cfg.max_episodes :] if cfg.max_episodes else ids
    for sub in ("img", "curves"):
        shutil.rmtree(out_dir / sub, ignore_errors=True)
    images = _Images(out_dir / "img", cfg.image_max_side, cfg.image_quality)
    place = {episode_id: i for i, episode_id in enumerate(reversed(shown))}  # newest first
    rendered: list[_Rendered | None] = [None] * len(place)
    with RateProgress("view", total=len(place)) as bar:
        for r in _render_all(store.iter_load(shown, index=index), images):
            rendered[place[r.episode_id]] = r
            bar.update(1, steps=r.steps, successes=int(r.outcome == "success"))
    done = [r for r in rendered if r is not None]
    counted = [r for r in done if r.counted]
    wins = sum(r.outcome == "success" for r in counted)
    curves = (
        learning_curves(run_dir.read_metrics(), out_dir / "curves", index) if cfg.curves else []
    )
    page = _page(
        title=str(run_dir.path),
        sections=[r.html for r in done],
        tasks=sorted({r.task for r in done}),
        outcomes=[*OUTCOMES, *sorted({r.outcome for r in done} - set(OUTCOMES))],
        total=len(ids),
        success=(wins / len(counted)) if counted else None,
        curves=[p.relative_to(out_dir).as_posix() for p in curves],
        bad=store.bad_shards,
        league=_league_table(run_dir.path),
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / ".index.html.tmp"
    tmp.write_text(scrub(page), encoding="utf-8")  # stores written before the scrubber too
    tmp.replace(out_dir / "index.html")
    return Report(out_dir / "index.html", len(done), len(ids), curves, dict(store.bad_shards))


def _league_table(run: Path) -> str:
    """The league table a league run wrote beside its saved league (empty: not a league)."""
    path = run / "league" / "table.txt"
    return path.read_text(encoding="utf-8") if path.is_file() else ""


@dataclass
class _Rendered:
    """One episode's section of the page, and what the summary and filters need of it."""

    episode_id: str
    html: str
    task: str
    outcome: str
    steps: int
    counted: bool  #: in the success rate (not truncated)


def _render(t: Trajectory, images: _Images) -> _Rendered:
    section = _episode_html(t, _episode_images(t, images))
    return _Rendered(t.episode_id, section, t.task, outcome(t), t.length, not t.is_truncated)


def _render_all(trajectories: Iterator[Trajectory], images: _Images) -> Iterator[_Rendered]:
    """Render episodes on a few threads while the store decodes the next ones; at most a few
    episodes (with their pixels) are held at once."""
    workers = max(1, min(4, os.cpu_count() or 1))
    pending: deque[Future[_Rendered]] = deque()
    with ThreadPoolExecutor(workers, thread_name_prefix="view") as pool:
        for t in trajectories:
            pending.append(pool.submit(_render, t, images))
            while len(pending) > 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _options(values: list[str]) -> str:
    return "".join(
        f'<option value="{html.escape(v, quote=True)}">{html.escape(v)}</option>' for v in values
    )


def _page(
    *,
    title: str,
    sections: list[str],
    tasks: list[str],
    outcomes: list[str],
    total: int,
    success: float | None,
    curves: list[str],
    bad: dict[Path, str],
    league: str = "",
) -> str:
    rate = f"{success:.1%}" if success is not None else "n/a"
    bad_html = "".join(f"<li>{html.escape(msg)}</li>" for msg in bad.values())
    bad_html = f'<ul class="bad">skipped shards: {bad_html}</ul>' if bad_html else ""
    if league:  # a league run: its table above the episodes
        bad_html += (
            f'<section id="league"><h2>League</h2><pre>{html.escape(league)}</pre></section>'
        )
    curve_html = "".join(f'<img src="{html.escape(c)}" alt="{html.escape(c)}">' for c in curves)
    template = string.Template(
        resources.files("devicerl.runtime").joinpath("viewer_template.html").read_text("utf-8")
    )
    return template.substitute(
        title=html.escape(title),
        summary=(
            f'<span id="shown">{len(sections)}</span> of {len(sections)} episodes shown '
            f"(newest first; {total} in the store); success rate of shown episodes "
            f"(truncated excluded): {rate}"
        ),
        task_options=_options(tasks),
        outcome_options=_options(outcomes),
        curves=f'<section id="curves" hidden>{curve_html}</section>' if curves else "",
        tabs=(
            '<nav id="tabs"><button id="tab-episodes" class="on">Episodes</button>'
            f'<button id="tab-curves">Learning curves ({len(curves)})</button></nav>'
            if curves
            else ""
        ),
        bad=bad_html,
        episodes="\n".join(sections),
    )
