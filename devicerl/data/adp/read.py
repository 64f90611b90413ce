"""ADP standardized trajectories (JSONL, or a JSON array as ADP's ``sample_std.json``) ->
`Trajectory` records, every value checked.

A trajectory's ``content`` is read in order: the first user ``text_observation`` (or, as ADP's
AitW and AndroidControl conversions write it, a leading ``message_action``) is the instruction;
an ``image_observation`` or ``web_observation`` is the screen the next action sees; each
``api_action`` is a step (`devicerl.data.adp.vocab` maps it; what has no devicerl action becomes
an invalid action with the call's text, counted in `ReadStats.unmapped`), as is a later
``message_action`` (an answer to the user) or ``code_action`` (invalid, counted); a screen after
the last action is the final observation; other text observations are counted in ``ignored``.
Two actions in a row share the screen before them. The details devicerl writes
(`devicerl.data.adp.details`) restore what ADP has no field for; without them the task is
``adp/<hash of the instruction>``, success is a positive total reward, and episode ids come from
the file's content and the line.

Files are data that must never choose a path: an image is read only from inside the folder that
holds the file (a relative path without ``..``, resolving inside it, a regular file of at most
`MAX_IMAGE_BYTES`, decoded within `devicerl.data.codec.MAX_PIXELS`, at most `MAX_DECODED_BYTES`
a trajectory); a missing or refused image, a malformed value (wrong type, non-finite or huge
number), more than `MAX_STEPS` steps, or per-step details that do not line up with the actions
are a `DataError` naming the file, the line and the field.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from devicerl.actions import Action
from devicerl.data.adp.details import Details, StepExtra
from devicerl.data.adp.elements import (
    MAX_ELEMENTS,
    apply_fixes,
    box_scale,
    check_annotation,
    elements_from_records,
    from_annotation,
)
from devicerl.data.adp.vocab import Screen, answer, from_call
from devicerl.errors import DataError, PathError
from devicerl.files import file_sha256, inside, read_bytes
from devicerl.records import EndReason, Observation, Step, Trajectory, UIElement

#: The longest line (one trajectory) read, and the largest JSON-array file.
MAX_LINE_BYTES = 64 << 20
#: The most steps one trajectory may hold.
MAX_STEPS = 10_000
#: The largest image file read, and the most bytes one trajectory's images may decode to.
MAX_IMAGE_BYTES = 32 << 20
MAX_DECODED_BYTES = 2 << 30
#: The largest reward a step may carry (in absolute value).
MAX_REWARD = 1e6
#: ADP standardized schema versions read (major version 1).
SUPPORTED_MAJOR = "1."
_SCREEN_CLASSES = ("image_observation", "web_observation")
_CLASSES = ("text_observation", "message_action", "api_action", "code_action", *_SCREEN_CLASSES)
_EPISODE_ID = re.compile(r"^[0-9a-f]{32}$")
#: Where converters other than ours put the task when no text observation holds it.
_INSTRUCTION_KEYS = ("instruction", "confirmed_task", "task_description", "goal")


@dataclass
class ReadStats:
    """What reading found: counts, and the calls that had no devicerl action (by function)."""

    trajectories: int = 0
    steps: int = 0
    successes: int = 0
    images: int = 0
    unmapped: Counter = field(default_factory=Counter)
    ignored: int = 0


def source_files(path: str | Path) -> list[Path]:
    """The ADP files of ``path``: the file itself, or a folder's ``*.jsonl`` and ``*.json``."""
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix in (".jsonl", ".json") and f.is_file())
        if not files:
            raise DataError(f"{p} holds no .jsonl or .json file")
        return files
    if not p.is_file():
        raise DataError(f"ADP file {p} does not exist or is not a regular file")
    return [p]


def iter_adp(path: str | Path, stats: ReadStats | None = None) -> Iterator[Trajectory]:
    """The trajectories of one ADP file (images read from its folder)."""
    p = Path(path)
    stats = stats if stats is not None else ReadStats()
    source_id = file_sha256(p)
    images = _Images(p.parent, stats)
    for where, record in _records(p):
        try:
            t = _trajectory(record, images, stats, f"adp:{source_id}#{where}")
        except (ValueError, TypeError, OverflowError, DataError) as e:
            raise DataError(f"{p}: {where}: {e}") from None
        stats.trajectories += 1
        stats.steps += t.length
        stats.successes += int(t.success)
        yield t


def _records(p: Path) -> Iterator[tuple[str, Any]]:
    """(where, parsed JSON) per trajectory: per line of JSONL, per item of a JSON array."""
    with open(p, "rb") as f:
        head = f.read(64).lstrip()
    if head.startswith(b"["):
        data = _json(read_bytes(p, MAX_LINE_BYTES, what="ADP file"), f"{p}: file")
        if not isinstance(data, list):
            raise DataError(f"{p}: a JSON file must hold an array of trajectories")
        yield from ((f"trajectory {i}", r) for i, r in enumerate(data))
        return
    with open(p, "rb") as f:
        for n, raw in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES + 1), b""), 1):
            if len(raw) > MAX_LINE_BYTES:
                raise DataError(f"{p}: line {n} is longer than {MAX_LINE_BYTES} bytes")
            if raw.strip():
                yield f"line {n}", _json(raw, f"{p}: line {n}")


def _json(raw: bytes, where: str) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise DataError(f"{where}: not UTF-8 text (byte {e.start})") from None
    except (ValueError, RecursionError) as e:  # JSONDecodeError, ints past Python's digit limit
        raise DataError(f"{where}: not valid JSON ({' '.join(str(e).split())[:120]})") from None


class _Images:
    """Screenshots named by the data, read only from inside ``root`` (decoded once each)."""

    def __init__(self, root: Path, stats: ReadStats) -> None:
        self.root = root.resolve()
        self.stats = stats
        self.cache: dict[str, np.ndarray] = {}
        self.decoded = 0

    def start(self) -> None:
        """A new trajectory: its images are decoded afresh and count against its budget."""
        self.cache.clear()
        self.decoded = 0

    def load(self, name: Any, where: str) -> np.ndarray:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"{where} is not an image path")
        if name in self.cache:
            return self.cache[name]
        parts = re.split(r"[\\/]+", name)
        if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name) or ".." in parts:
            raise ValueError(
                f"{where}: image path {name!r} leads outside the dataset folder: refused"
            )
        path = self.root.joinpath(*[s for s in parts if s not in ("", ".")])
        try:
            inside(self.root, path, what="image path")
        except PathError as e:
            raise ValueError(f"{where}: {e}") from None
        if not path.exists():
            raise ValueError(f"{where}: image {name!r} is not in the dataset folder {self.root}")
        from devicerl.data.codec import decode_image

        try:
            pixels = decode_image(read_bytes(path, MAX_IMAGE_BYTES, within=self.root, what="image"))
        except DataError as e:
            raise ValueError(f"{where}: image {name!r}: {e}") from None
        self.decoded += pixels.nbytes
        if self.decoded > MAX_DECODED_BYTES:
            limit = f"{MAX_DECODED_BYTES >> 30} GiB"
            raise ValueError(f"{where}: the trajectory's images decode to more than {limit}")
        self.cache[name] = pixels  # the observations hold the pixels anyway: no extra memory
        self.stats.images += 1
        return pixels


# -- checked values ---------------------------------------------------------------------------
def _object(v: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise ValueError(f"{where} is {type(v).__name__}, not an object")
    return v


def _str(d: Mapping[str, Any], key: str, where: str, optional: bool = False) -> str | None:
    v = d.get(key)
    if v is None and optional:
        return None
    if not isinstance(v, str):
        raise ValueError(f"{where}.{key} is {type(v).__name__}, not text")
    return v


def _reward(v: Any, where: str) -> float:
    if v is None:
        return 0.0
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"{where}.reward is {type(v).__name__}, not a number")
    if not (math.isfinite(v) and abs(v) <= MAX_REWARD):
        raise ValueError(f"{where}.reward {v!r} is not a finite number within {MAX_REWARD:g}")
    return float(v)


def _size(v: Any, where: str) -> tuple[int, int]:
    if not (isinstance(v, list) and len(v) == 2 and all(type(x) is int for x in v)):
        raise ValueError(f"{where} is not a [width, height] pair of integers")
    if not all(0 <= x <= 1 << 16 for x in v):
        raise ValueError(f"{where} {v} is outside [0, 65536]")
    return (v[0], v[1])


# -- screens ----------------------------------------------------------------------------------
@dataclass
class _Seen:
    """A screen as read: size, pixels, elements and the observation's extras."""

    size: tuple[int, int] = (0, 0)
    pixels: np.ndarray | None = None
    elements: list[UIElement] = field(default_factory=list)
    extras: dict[str, Any] = field(default_factory=dict)
    annotated: bool = False

    @property
    def web(self) -> bool:
        return "url" in self.extras


def _image(item: Mapping[str, Any], images: _Images, where: str) -> _Seen:
    pixels = images.load(item.get("content"), f"{where}.content")
    size = (int(pixels.shape[1]), int(pixels.shape[0]))
    anns = item.get("annotations") or []
    if not isinstance(anns, list) or len(anns) > MAX_ELEMENTS:
        raise ValueError(f"{where}.annotations is not a list of at most {MAX_ELEMENTS}")
    anns = [check_annotation(a, f"{where}.annotations[{i}]") for i, a in enumerate(anns)]
    scale = box_scale(anns, size)
    elements = [from_annotation(a, i, scale) for i, a in enumerate(anns)]
    return _Seen(size, pixels, elements, annotated=bool(anns))


def _screen(item: Mapping[str, Any], images: _Images, where: str) -> _Seen:
    if item["class_"] == "image_observation":
        return _image(item, images, where)
    inner = item.get("image_observation")
    seen = _image(_object(inner, f"{where}.image_observation"), images,
                  f"{where}.image_observation") if inner is not None else _Seen()  # fmt: skip
    if item.get("viewport_size") is not None:
        seen.size = _size(item["viewport_size"], f"{where}.viewport_size")
    seen.extras["url"] = _str(item, "url", where, optional=True)
    for key in ("html", "axtree"):
        if _str(item, key, where, optional=True) is not None:
            seen.extras[key] = item[key]
    return seen


def _observe(seen: _Seen | None, extra: dict[str, Any] | None, where: str) -> _Seen:
    """The screen with what the details add (``size``, whole ``elements``, element ``fixes``)."""
    seen = replace(seen) if seen is not None else _Seen()
    if not extra:
        return seen
    unknown = set(extra) - {"size", "elements", "fixes"}
    if unknown:
        raise ValueError(f"{where}: unknown screen field {sorted(unknown)[0]!r}")
    if "size" in extra:
        seen.size = _size(extra["size"], f"{where}.size")
    if "elements" in extra:
        seen.elements = elements_from_records(extra["elements"], f"{where}.elements")
    if "fixes" in extra:
        seen.elements = apply_fixes(seen.elements, extra["fixes"], f"{where}.fixes")
    return seen


# -- trajectories -----------------------------------------------------------------------------
def _check_header(record: Any) -> Mapping[str, Any]:
    record = _object(record, "the trajectory")
    version = record.get("schema_version", "1.0.0")
    if not isinstance(version, str) or not version.startswith(SUPPORTED_MAJOR):
        raise ValueError(f"schema_version {str(version)[:20]!r} is not an ADP 1.x version")
    if not isinstance(record.get("id", ""), str):
        raise ValueError("id is not text")
    content = record.get("content")
    if not isinstance(content, list):
        raise ValueError("content is missing or not a list")
    for i, item in enumerate(content):
        cls = _object(item, f"content[{i}]").get("class_")
        if cls not in _CLASSES:
            raise ValueError(
                f"content[{i}].class_ {str(cls)[:40]!r} is not one of {list(_CLASSES)}"
            )
    actions = sum(1 for it in content if it["class_"].endswith("_action"))
    if actions > MAX_STEPS:
        raise ValueError(f"{actions} steps in one trajectory, more than the {MAX_STEPS} allowed")
    return record


@dataclass
class _Walk:
    """The content split into its parts: instruction, (screen, action) per step, final screen."""

    instruction: str | None = None
    steps: list[tuple[_Seen | None, Mapping[str, Any], str]] = field(default_factory=list)
    final: _Seen | None = None


def _walk(content: Sequence[Mapping[str, Any]], images: _Images, stats: ReadStats) -> _Walk:
    out = _Walk()
    pending: _Seen | None = None
    for i, item in enumerate(content):
        where, cls = f"content[{i}]", item["class_"]
        if cls in _SCREEN_CLASSES:
            pending = _screen(item, images, where)
        elif cls == "text_observation":
            text = _str(item, "content", where)
            if item.get("source") == "user" and out.instruction is None and not out.steps:
                out.instruction = text
            else:
                stats.ignored += 1
        elif (
            cls == "message_action"
            and out.instruction is None
            and not out.steps
            and pending is None
        ):
            out.instruction = _str(item, "content", where)
        else:
            out.steps.append((pending, item, where))
            pending = None
    out.final = pending
    return out


def _action(item: Mapping[str, Any], seen: _Seen, stats: ReadStats, where: str) -> Action:
    cls = item["class_"]
    if cls == "message_action":  # the agent tells the user something: an answer
        body = _str(item, "content", where) or ""
        if body.strip():
            return answer(body)
        stats.unmapped[cls] += 1
        return Action.invalid(body, "an empty message to the user")
    if cls == "code_action":
        stats.unmapped[cls] += 1
        return Action.invalid(_str(item, "content", where) or "", "code has no devicerl action")
    function = _str(item, "function", where) or ""
    kwargs = _object(item.get("kwargs", {}), f"{where}.kwargs")
    try:
        action = from_call(function, kwargs, Screen(seen.size, seen.elements, seen.web))
    except ValueError as e:
        raise ValueError(f"{where}.{e}") from None
    if action.is_invalid and function != "invalid":
        stats.unmapped[function] += 1
    return action


def _exact(mapped: Action, extra: StepExtra, where: str) -> Action:
    """The exact action the details keep, when it is the one the call maps to (rounding
    apart); else the mapped one."""
    if extra.action is None:
        return mapped
    try:
        exact = Action.from_dict(extra.action)
    except DataError as e:
        raise ValueError(f"{where}: {e}") from None
    if exact.type is not mapped.type:
        return mapped
    if exact.touch is not None and mapped.touch is not None:
        assert exact.lift is not None and mapped.lift is not None
        gap = max(abs(a - b) for a, b in zip((*exact.touch, *exact.lift),
                                             (*mapped.touch, *mapped.lift)))  # fmt: skip
        return exact if gap <= 1e-6 else mapped
    return exact


def _instruction(walk: _Walk, details: Details) -> str:
    if walk.instruction is not None:
        return walk.instruction
    for key in _INSTRUCTION_KEYS:
        if isinstance(details.foreign.get(key), str):
            return details.foreign[key]
    return ""


def _trajectory(record: Any, images: _Images, stats: ReadStats, source: str) -> Trajectory:
    record = _check_header(record)
    details = Details.read(record.get("details") or {})
    images.start()
    walk = _walk(record["content"], images, stats)
    extras = details.steps
    if extras is not None and len(extras) != len(walk.steps):
        raise ValueError(
            f"details.devicerl.steps holds {len(extras)} entries for {len(walk.steps)} actions"
        )
    instruction = _instruction(walk, details)
    steps: list[Step] = []
    seen: _Seen | None = None
    for h, (screen, item, where) in enumerate(walk.steps):
        extra = extras[h] if extras is not None else StepExtra()
        if screen is None and extras is None and seen is not None:
            screen = seen  # two actions in a row: the second sees the screen the first did
        seen = _observe(screen, extra.screen, f"details.devicerl.steps[{h}].screen")
        action = _exact(_action(item, seen, stats, where), extra, f"details.devicerl.steps[{h}]")
        description = _str(item, "description", where, optional=True)
        steps.append(Step(
            observation=_observation(seen, instruction, h),
            action=action,
            reward=_reward(item.get("reward"), where),
            terminated=extra.terminated if extras is not None else h == len(walk.steps) - 1,
            truncated=extra.truncated,
            info={"description": description} if description is not None else {},
            text=_str(item, "reasoning_content", where, optional=True),
            log_prob=extra.log_prob,
            policy_version=extra.policy_version,
            verdict=extra.verdict,
        ))  # fmt: skip
    final = None
    if walk.final is not None or details.final is not None:
        final = _observation(_observe(walk.final, details.final, "details.devicerl.final"),
                             instruction, len(steps))  # fmt: skip
    return _episode(record, details, instruction, steps, final, source)


def _observation(seen: _Seen, instruction: str, step: int) -> Observation:
    return Observation(
        instruction,
        seen.size,
        seen.pixels,
        list(seen.elements),
        step=step,
        extras=dict(seen.extras),
    )


def _episode(
    record: Mapping[str, Any],
    details: Details,
    instruction: str,
    steps: list[Step],
    final: Observation | None,
    source: str,
) -> Trajectory:
    key = " ".join(instruction.lower().split())
    episode_id = details.episode_id
    if episode_id is None or not _EPISODE_ID.match(episode_id):
        episode_id = uuid.uuid5(uuid.NAMESPACE_URL, source).hex
    t = Trajectory(
        task=details.task or "adp/" + hashlib.sha1(key.encode("utf-8")).hexdigest()[:10],
        instruction=instruction,
        seed=details.seed,
        steps=steps,
        final_observation=final,
        episode_id=episode_id,
        device=details.device or "adp",
        started_at=0.0,
        max_steps=details.max_steps,
        phase=details.phase or "train",
        judgement=details.judgement,
        ground_truth=details.ground_truth,
        extras={"adp": {"id": record.get("id", ""), "details": details.foreign}},
    )
    reason = details.end_reason
    if reason is None:
        if t.total_reward > 0:
            reason = EndReason.SUCCESS
        elif steps and steps[-1].action.is_terminal:
            reason = EndReason.AGENT_ENDED
        else:
            reason = EndReason.MAX_STEPS
    t.end(reason, success=details.success, cause=details.truncation_cause)
    t.ended_at = None
    return t
