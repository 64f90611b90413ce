"""`build_report`: a static HTML report of a run (``devicerl view RUN_DIR``).

One folder (``RUN/report/`` by default) with ``index.html``, ``img/`` (screenshots: as stored
where a browser shows them and they fit ``image_max_side``, else downscaled JPEG) and
``curves/`` (learning-curve PNGs). For each episode (newest first, at most
``max_episodes``): a screen for every step with the action drawn over it in SVG (a circle for a
tap, a double ring for a long press, an arrow for a swipe), the action, reward, the judge's
verdict and the model's text, and the episode's answer when the agent gave one;
filters by task and outcome in a few lines of inline JavaScript. No server and no network are
needed: open ``index.html`` in a browser.

The screen is the stored screenshot or, for steps stored without one (DOM-only browser runs,
imports without images), a wireframe drawn from the stored UI elements: each element's box,
its role and its text, clickable, editable and focused ones told apart by colour.

The stores it reads are data users exchange, so nothing in them chooses a path or reaches the
page unescaped: image names are made from a hash of the episode id (their extension from the
image's own magic bytes, its header read by Pillow), every text and attribute is escaped, and
the report folder is the viewer's own: it must be new, empty, or a report it wrote before
(``.devicerl-report.json`` lists the files it wrote); it writes only there, never through a
link, and deletes only files of that list.
"""

from __future__ import annotations

import html
import itertools
import json
import os
import re
import string
import tempfile
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devicerl.actions import Action, ActionType
from devicerl.errors import DataError, PathError
from devicerl.files import (
    check_output,
    read_text,
    safe_name,
    write_bytes,
    write_text,
    write_text_parts,
)
from devicerl.secrets import scrub

if TYPE_CHECKING:  # the heavy modules load in build_report, so `devicerl --help` stays fast
    from devicerl.records import Observation, Trajectory, UIElement


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
    bad_shards: dict[str, str]  #: what was skipped (shards, a metrics file), and why


#: Every outcome label, listed in the filter even when no episode has it yet.
OUTCOMES = ("success", "failure", "agent_ended", "max_steps", "truncated")  # EndReason values


def outcome(t: Trajectory) -> str:
    """The label the filters use: 'success', or the end reason of a non-successful episode."""
    if t.success:
        return "success"
    return t.end_reason.value if t.end_reason is not None else "running"


#: The report folder's list of the files the viewer wrote there (what it may replace or delete).
MANIFEST = ".devicerl-report.json"
#: The only paths a report holds: its page, its images, its curves.
_OWN = re.compile(
    r"^(index\.html|img/[A-Za-z0-9_.-]+\.(jpg|png|webp)|curves/[A-Za-z0-9_.-]+\.png)$"
)
_SUBFOLDERS = ("img", "curves")
#: Text the page shows from files of the run folder, at most this long.
MAX_TABLE_BYTES = 1 << 20


class ReportFolder:
    """The folder a report goes to: new, empty, or a report the viewer wrote before.

    Every path written is one the viewer named (`path`, checked against `_OWN`) and is written
    by replacing the entry (a link planted there is replaced, not followed); `finish` deletes
    the previous report's files that this one did not write again (only names in its
    manifest), then writes the new manifest."""

    def __init__(self, folder: Path) -> None:
        check_output(folder, what="report folder")
        self.folder = folder
        self.previous = self._previous()
        self.written: set[str] = set()
        self._lock = threading.Lock()

    def _previous(self) -> list[str]:
        if not self.folder.is_dir():
            return []
        entries = {e.name for e in self.folder.iterdir()}
        if not entries:
            return []
        if MANIFEST not in entries:
            raise PathError(
                f"report folder {self.folder} holds files devicerl view did not write (no "
                f"{MANIFEST}): choose a new or empty folder with --out"
            )
        try:
            listed = json.loads(read_text(self.folder / MANIFEST, 1 << 24, within=self.folder))
        except (DataError, ValueError) as e:
            raise PathError(f"report folder {self.folder}: unreadable {MANIFEST}: {e}") from None
        if not isinstance(listed, list):
            raise PathError(f"report folder {self.folder}: {MANIFEST} is not a list of files")
        return [p for p in listed if isinstance(p, str) and _OWN.match(p)]

    def subfolder(self, name: str) -> Path:
        """``img`` or ``curves``, created as a real folder (a link there is refused)."""
        path = self.folder / name
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            raise PathError(f"report folder {self.folder}: {name} is not a folder: refused")
        path.mkdir(parents=True, exist_ok=True)
        return path

    def path(self, rel: str) -> Path:
        """The path of a file the viewer writes (a relative name it made), recorded."""
        if not _OWN.match(rel):
            raise ValueError(f"the viewer names no file {rel!r}")
        with self._lock:
            self.written.add(rel)
        return self.folder / rel

    def record(self, path: Path) -> str:
        """Record a file written under the folder by a helper (the curves); its name."""
        rel = path.relative_to(self.folder).as_posix()
        self.path(rel)
        return rel

    def finish(self) -> None:
        for rel in set(self.previous) - self.written:
            path = self.folder / rel
            if path.is_symlink() or path.is_file():
                path.unlink()  # never follows a link: removes the entry itself
        for name in _SUBFOLDERS:
            sub = self.folder / name
            if sub.is_dir() and not sub.is_symlink() and not any(sub.iterdir()):
                sub.rmdir()
        write_text(self.folder / MANIFEST, json.dumps(sorted(self.written), indent=0))


class _Images:
    """Writes an episode's screenshots, once per distinct stored image, under names the viewer
    makes from the episode id's hash: as stored where a browser shows the format and the image
    fits ``max_side`` (nothing decoded), else decoded, downscaled and written as JPEG. An image
    that cannot be read is left out (the step shows its wireframe) and listed in `problems`."""

    def __init__(self, out: ReportFolder, max_side: int, quality: int) -> None:
        self.out, self.max_side, self.quality = out, max_side, quality
        self.folder = out.subfolder("img")
        self.problems: dict[str, str] = {}

    def write(self, data: bytes, episode_id: str, index: int) -> tuple[str, int, int] | None:
        try:
            return self._write(data, f"img/{safe_name(episode_id, max_len=40)}-{index}")
        except DataError as e:
            where = f"episode {episode_id} screen {index}"
            self.problems[where] = f"{where}: {e}"
            return None

    def _write(self, data: bytes, name: str) -> tuple[str, int, int]:
        import io

        from PIL import Image

        from devicerl.data.codec import decode_image, image_size

        fmt, w, h = image_size(data)  # from the header: nothing decoded yet
        if fmt != "raw" and max(w, h) <= self.max_side:
            rel = f"{name}.{'jpg' if fmt == 'jpeg' else fmt}"
            write_bytes(self.out.path(rel), data)
            return rel, w, h
        pixels = decode_image(data)
        img = Image.fromarray(pixels)
        img.thumbnail((self.max_side, self.max_side))
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=self.quality)
        write_bytes(self.out.path(f"{name}.jpg"), buf.getvalue())
        return f"{name}.jpg", pixels.shape[1], pixels.shape[0]


def _marks(action: Action | None, w: float, h: float) -> str:
    if action is None or action.touch is None:
        return ""
    r = 0.025 * max(w, h)
    x0, y0 = action.touch
    if action.type is ActionType.LONG_PRESS:
        return (
            f'<circle class="press" cx="{x0 * w:.1f}" cy="{y0 * h:.1f}" r="{r:.1f}"/>'
            f'<circle class="press" cx="{x0 * w:.1f}" cy="{y0 * h:.1f}" r="{r * 1.6:.1f}"/>'
        )
    assert action.lift is not None
    x1, y1 = action.lift
    if action.is_tap:
        return f'<circle class="tap" cx="{x0 * w:.1f}" cy="{y0 * h:.1f}" r="{r:.1f}"/>'
    return (
        f'<circle class="swipe-start" cx="{x0 * w:.1f}" cy="{y0 * h:.1f}" r="{r * 0.6:.1f}"/>'
        f'<line class="swipe" x1="{x0 * w:.1f}" y1="{y0 * h:.1f}" x2="{x1 * w:.1f}" '
        f'y2="{y1 * h:.1f}" stroke-width="{r * 0.35:.1f}" marker-end="url(#arrow)"/>'
    )


#: Elements a wireframe draws at most (the largest first); text per element at most.
WIRE_ELEMENTS = 300
WIRE_TEXT = 80


def _wire_size(obs: Observation) -> tuple[float, float]:
    """The screen size to draw: the stored one, else what the element boxes span."""
    w, h = obs.screen_size
    if min(w, h) > 0:
        return float(w), float(h)
    right = max((e.bbox[2] for e in obs.elements), default=0.0)
    bottom = max((e.bbox[3] for e in obs.elements), default=0.0)
    return (float(right), float(bottom)) if min(right, bottom) > 0 else (90.0, 160.0)


def _labelled(elements: list[UIElement]) -> set[int]:
    """Indexes of the elements whose text the wireframe writes: those with text and no element
    with text inside them (a container's text is its children's, written by them)."""
    texts = [i for i, e in enumerate(elements) if (e.text or e.value).strip()]
    out = set()
    for i in texts:
        left, top, right, bottom = elements[i].bbox
        inner = any(
            j != i
            and elements[j].area < elements[i].area
            and left <= elements[j].bbox[0]
            and top <= elements[j].bbox[1]
            and elements[j].bbox[2] <= right
            and elements[j].bbox[3] <= bottom
            for j in texts
        )
        if not inner:
            out.add(i)
    return out


def _wire_element(e: UIElement, w: float, h: float, labelled: bool) -> str:
    left, top, right, bottom = (float(v) for v in e.bbox)
    left, top = max(0.0, left), max(0.0, top)
    right, bottom = min(w, right), min(h, bottom)
    bw, bh = right - left, bottom - top
    if bw < 1 or bh < 1:
        return ""
    kind = "edit" if e.editable else "click" if e.clickable else "box"
    cls = f"el {kind}" + (" focus" if e.focused else "")
    role = html.escape(_short(e.role or "", 24))
    text = " ".join((e.text or e.value or "").split())
    title = html.escape(_short(text, WIRE_TEXT))
    label = title if labelled else ""
    rect = (
        f'<rect class="{cls}" x="{left:.1f}" y="{top:.1f}" width="{bw:.1f}" height="{bh:.1f}">'
        f"<title>{role}: {title}</title></rect>"
    )
    if not label or bh < 5:
        return rect
    size = max(4.0, min(11.0, bh * 0.7, h / 18))
    return (
        f'{rect}<svg x="{left:.1f}" y="{top:.1f}" width="{bw:.1f}" height="{bh:.1f}">'
        f'<text x="2" y="{min(bh - 1, (bh + size * 0.7) / 2):.1f}" font-size="{size:.1f}">'
        f"{label}</text></svg>"
    )


def _wireframe(obs: Observation | None) -> tuple[str, float, float]:
    """An SVG drawing of the screen from its stored UI elements (the page when no screenshot
    was stored), and its size."""
    if obs is None:
        w, h, elements = 90.0, 160.0, []
    else:
        (w, h), elements = _wire_size(obs), obs.elements
    shown = sorted(elements, key=lambda e: -e.area)[:WIRE_ELEMENTS]
    labelled = _labelled(shown)
    body = "".join(_wire_element(e, w, h, i in labelled) for i, e in enumerate(shown))
    if not body:
        note = "no screen stored" if obs is None else "no UI elements"
        body = (
            f'<text class="none" x="{w / 2:.1f}" y="{h / 2:.1f}" font-size="{max(4, w / 14):.1f}"'
            f' text-anchor="middle">{note}</text>'
        )
    svg = (
        f'<svg class="wire" viewBox="0 0 {w:.1f} {h:.1f}" preserveAspectRatio="none" '
        f'role="img" aria-label="wireframe of the screen">'
        f'<rect class="page" x="0" y="0" width="{w:.1f}" height="{h:.1f}"/>{body}</svg>'
    )
    return svg, w, h


def _screen(
    obs: Observation | None, image: tuple[str, int, int] | None, action: Action | None
) -> str:
    """The screen of one step: its screenshot, else a wireframe of its UI elements; the
    action drawn over it."""
    if image is not None:
        src, w, h = image
        body = f'<img src="{html.escape(src)}" alt="screenshot" loading="lazy">'
        kind = "shot"
    else:
        body, w, h = _wireframe(obs)
        kind = "shot wired"
    svg = f'<svg class="marks" viewBox="0 0 {w:g} {h:g}" preserveAspectRatio="none">'
    marks = _marks(action, w, h)
    return f'<div class="{kind}" style="aspect-ratio:{w:g}/{h:g}">{body}{svg}{marks}</svg></div>'


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
    if t.final_observation is not None or not t.steps:
        final = _screen(t.final_observation, images[-1], None)
        steps += f'<figure class="step final">{final}<figcaption>final</figcaption></figure>'
    cause = f" ({html.escape(t.truncation_cause)})" if t.truncation_cause else ""
    verdict = _kv(t.judgement.verdict) if t.judgement is not None else ""
    # a league run: the policy that played it (a single-policy run's is "agent")
    policy = t.plan.policy if t.plan is not None and t.plan.policy != "agent" else None
    played = f"policy {html.escape(str(policy))}, " if policy else ""
    label = html.escape(label, quote=True)
    head = (
        f'<h2><span class="badge {label}">{label}</span>{cause} {html.escape(t.task)} '
        f"<small>{played}{t.length} steps, reward {t.total_reward:g}, "
        f"seed {html.escape(str(t.seed))}, episode {html.escape(t.episode_id[:12])}</small></h2>"
        f'<p class="instr">{html.escape(t.instruction or "")}</p>{verdict}'
        + (f'<p class="answer">answer: {html.escape(t.answer)}</p>' if t.answer is not None else "")
    )
    return (
        f'<section class="episode" data-task="{html.escape(t.task, quote=True)}" '
        f'data-outcome="{label}" data-episode="{html.escape(t.episode_id, quote=True)}">{head}'
        f'<div class="steps">{steps}</div></section>'
    )


def _episode_images(
    t: Trajectory, screens: list[bytes | None], images: _Images
) -> list[tuple[str, int, int] | None]:
    """One entry per step plus one for the final observation, from their stored screens."""
    written: dict[int, tuple[str, int, int] | None] = {}
    out: list[tuple[str, int, int] | None] = []
    for i, data in enumerate(screens):
        if data is not None and id(data) not in written:
            written[id(data)] = images.write(data, t.episode_id, i)
        out.append(written[id(data)] if data is not None else None)
    return out


def build_report(
    run: str | Path, out: str | Path | None = None, config: ViewConfig | None = None
) -> Report:
    """Write the report of the run (or bare store) at ``run``; returns what was written.

    The episodes come from the store's index (`TrajectoryStore.index`, no shard opened to list
    them); only the shards of the episodes shown are read (newest first, each once, checked as
    they are read), screenshots are decoded while earlier episodes are drawn on other threads
    (PIL releases the GIL), and each drawn episode goes to a temporary file at once, so memory
    holds a few episodes whatever the store's size; a progress bar counts them.
    """
    from devicerl.data.store import TrajectoryStore
    from devicerl.runtime.reports.plots import learning_curves
    from devicerl.runtime.runs.folder import RunDir, find_store
    from devicerl.runtime.runs.progress import RateProgress

    cfg = config or ViewConfig()
    run_dir = RunDir(run)
    out = ReportFolder(Path(out) if out is not None else run_dir.report)  # before any work
    store = TrajectoryStore(find_store(run), skip_bad=cfg.skip_bad)
    index = store.index(verify=False)  # the episodes shown are checked as they are read
    ids = index.column("episode_id").to_pylist()
    shown = ids[-cfg.max_episodes :] if cfg.max_episodes else ids
    images = _Images(out, cfg.image_max_side, cfg.image_quality)
    tally = _Tally()
    with _Spool() as sections, RateProgress("view", total=len(shown)) as bar:
        newest_first = store.iter_stored_screens(shown, index=index, newest_first=True)
        for r in _render_all(newest_first, images):
            sections.add(r.html)
            tally.add(r)
            bar.update(1, steps=r.steps, successes=int(r.outcome == "success"))
        problems = {str(path): msg for path, msg in store.bad_shards.items()}
        problems.update(images.problems)
        curves: list[Path] = []
        if cfg.curves:
            try:
                records = run_dir.read_metrics()
            except DataError as e:  # a damaged or foreign metrics file costs only the curves
                problems[str(run_dir.metrics_path)] = str(e)
                records = []
            curves = learning_curves(records, out.subfolder("curves"), index)
        head, tail = _page(
            title=str(run_dir.path),
            tally=tally,
            total=len(ids),
            curves=[out.record(p) for p in curves],
            bad=problems,
            league=_league_table(run_dir.path, problems),
        )
        # scrubbed part by part: stores written before the scrubber too
        write_text_parts(out.path("index.html"), itertools.chain([head], sections, [tail]))
    out.finish()
    return Report(out.folder / "index.html", tally.shown, len(ids), curves, problems)


def _league_table(run: Path, problems: dict[str, str]) -> str:
    """The league table a league run wrote beside its saved league (empty: not a league)."""
    path = run / "league" / "table.txt"
    if not (path.exists() or path.is_symlink()):
        return ""
    try:
        return read_text(path, MAX_TABLE_BYTES, within=run, what="league table")
    except DataError as e:
        problems[str(path)] = str(e)
        return ""


@dataclass
class _Rendered:
    """One episode's section of the page, and what the summary and filters need of it."""

    episode_id: str
    html: str
    task: str
    outcome: str
    steps: int
    counted: bool  #: in the success rate (not truncated)


@dataclass
class _Tally:
    """What the page's header says of the episodes drawn: how many, their tasks and
    outcomes, and the successes among those in the success rate."""

    shown: int = 0
    counted: int = 0
    wins: int = 0
    tasks: set[str] = field(default_factory=set)
    outcomes: set[str] = field(default_factory=set)

    def add(self, r: _Rendered) -> None:
        self.shown += 1
        self.counted += int(r.counted)
        self.wins += int(r.counted and r.outcome == "success")
        self.tasks.add(r.task)
        self.outcomes.add(r.outcome)

    @property
    def success(self) -> float | None:
        return self.wins / self.counted if self.counted else None


class _Spool:
    """The drawn episodes' sections, in order, in a temporary file (each scrubbed as it
    comes), read back one at a time when the page is written."""

    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile()  # noqa: SIM115 - closed by __exit__

    def add(self, section: str) -> None:
        data = scrub(section).encode("utf-8")
        self.file.write(len(data).to_bytes(8, "little") + data)

    def __iter__(self) -> Iterator[str]:
        self.file.seek(0)
        while head := self.file.read(8):
            yield self.file.read(int.from_bytes(head, "little")).decode("utf-8") + "\n"

    def __enter__(self) -> _Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.file.close()


def _render(t: Trajectory, screens: list[bytes | None], images: _Images) -> _Rendered:
    section = _episode_html(t, _episode_images(t, screens, images))
    return _Rendered(t.episode_id, section, t.task, outcome(t), t.length, not t.is_truncated)


def _render_all(
    episodes: Iterator[tuple[Trajectory, list[bytes | None]]], images: _Images
) -> Iterator[_Rendered]:
    """Render episodes (images written, decoded only where they must be) on a few threads
    while the store reads the next ones; at most a few episodes are held at once."""
    workers = max(1, min(4, os.cpu_count() or 1))
    pending: deque[Future[_Rendered]] = deque()
    with ThreadPoolExecutor(workers, thread_name_prefix="view") as pool:
        for t, screens in episodes:
            pending.append(pool.submit(_render, t, screens, images))
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
    tally: _Tally,
    total: int,
    curves: list[str],
    bad: dict[str, str],
    league: str = "",
) -> tuple[str, str]:
    """The page before the episodes' sections and after them."""
    rate = f"{tally.success:.1%}" if tally.success is not None else "n/a"
    bad_html = "".join(f"<li>{html.escape(msg)}</li>" for msg in bad.values())
    bad_html = f'<ul class="bad">skipped: {bad_html}</ul>' if bad_html else ""
    if league:  # a league run: its table above the episodes
        bad_html += (
            f'<section id="league"><h2>League</h2><pre>{html.escape(league)}</pre></section>'
        )
    curve_html = "".join(f'<img src="{html.escape(c)}" alt="{html.escape(c)}">' for c in curves)
    text = (
        resources.files("devicerl.runtime.reports")
        .joinpath("viewer_template.html")
        .read_text("utf-8")
    )
    before, _, after = text.partition("$episodes")
    values = {
        "title": html.escape(title),
        "summary": (
            f'<span id="shown">{tally.shown}</span> of {tally.shown} episodes shown '
            f"(newest first; {total} in the store); success rate of shown episodes "
            f"(truncated excluded): {rate}"
        ),
        "task_options": _options(sorted(tally.tasks)),
        "outcome_options": _options([*OUTCOMES, *sorted(tally.outcomes - set(OUTCOMES))]),
        "curves": f'<section id="curves" hidden>{curve_html}</section>' if curves else "",
        "tabs": (
            '<nav id="tabs"><button id="tab-episodes" class="on">Episodes</button>'
            f'<button id="tab-curves">Learning curves ({len(curves)})</button></nav>'
            if curves
            else ""
        ),
        "bad": bad_html,
    }
    return string.Template(before).substitute(values), string.Template(after).substitute(values)
