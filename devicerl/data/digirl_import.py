"""Import DigiRL's released trajectory files (``*.pt``) into the trajectory store.

The reference saves ``torch.save(list_of_trajectories)``; each trajectory is a list of step
dicts with keys ``observation`` (the AutoUI prompt: "Previous Actions: ... Goal: <task></s>"),
``next_observation``, ``image_features`` / ``next_image_features`` (BLIP-2 image features,
numpy arrays), ``image_path``, ``task`` (the instruction), ``reward``, ``done``, ``action`` (the
model's AutoUI text), ``trajectory_reward`` and ``mc_return``.

Loading is safe: `torch.load(weights_only=True)` with only numpy's array/scalar/dtype
constructors allowed; anything else in the pickle (a function call, a foreign class) is
refused with a `DataError`, never executed.

Mapping (documented choices):
- ``action`` is parsed with `parse_autoui` (never fails; unparseable text becomes an invalid
  action; AutoUI's spelling of the newer types, long press, open app, wait and answer, reads
  as those types) and kept verbatim in `Step.text`.
- ``image_path`` names the screenshot taken *after* the step (the reference saves
  ``<id>_<n>.png`` after its n-th action), so step h's own screenshot is step h-1's
  ``image_path``, the first one is the same name with n-1, and the last ``image_path`` is the
  final observation. Images are read only from inside ``image_root``: ``image_root / path`` for
  a relative path, then ``image_root / basename``; a path that leads outside the root (``..``,
  a symlink) is refused with a `DataError` that names it (never its content). Without
  ``image_root`` or when the file is missing or not an image, the screenshot is None.
- ``image_features`` go to ``Observation.extras["image_features"]`` (float32 array; the last
  ``next_image_features`` to the final observation), unless ``features=False``. The prompt is in
  ``extras["prompt"]``; ``mc_return`` and ``trajectory_reward`` in each step's ``info``.
- Outcome: success when the trajectory reward is positive; otherwise ``agent_ended`` if the
  last action is complete/impossible, else ``max_steps``. Screen size is the image size, or
  (0, 0) when no image is available. Task names come from ``task_names`` (instruction -> name,
  e.g. from an AitW list) or are ``digirl/<hash of the instruction>``.
- Episode ids are derived from the file's content (its sha256) and the trajectory's position,
  so importing a file twice (under any name) gives the same ids and adds nothing, while two
  different files never share an id (``siteA/trajectories.pt`` and ``siteB/trajectories.pt``
  are two sources).
- Values are checked, never guessed: ``task`` and ``action`` must be text (``None`` never
  becomes the text "None"; an absent prompt is empty), rewards finite and in [-1, 1] (DigiRL's
  are 0 or 1 per step), ``mc_return`` finite, ``done`` a scalar flag; anything else is a
  `DataError` naming the file, the trajectory and the step.
"""

from __future__ import annotations

import hashlib
import logging
import math
import pickle
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from devicerl.actions import parse_autoui
from devicerl.errors import DataError
from devicerl.files import file_sha256, read_bytes
from devicerl.records import EndReason, Observation, Step, Trajectory

log = logging.getLogger(__name__)

REQUIRED_KEYS = ("observation", "task", "reward", "done", "action")
_NUMBERED = re.compile(r"^(.*_)(\d+)(\.\w+)$")
#: Step rewards (and a trajectory's reward) DigiRL writes: 0 or 1; accepted: [-1, 1].
REWARD_RANGE = (-1.0, 1.0)
#: The largest screenshot file read from ``image_root``.
MAX_IMAGE_BYTES = 64 << 20


def _safe_globals() -> list[Any]:
    """numpy's array, scalar and dtype constructors, under their numpy 1 and 2 names."""
    core = np._core.multiarray if hasattr(np, "_core") else np.core.multiarray  # type: ignore[attr-defined]
    allowed: list[Any] = [np.ndarray, np.dtype]
    for fn in (core._reconstruct, core.scalar):
        for mod in ("numpy.core.multiarray", "numpy._core.multiarray"):
            allowed.append((fn, f"{mod}.{fn.__name__}"))
    for t in (np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64):
        allowed.append(type(np.dtype(t)))
    allowed += [type(np.dtype(np.uint8)), type(np.dtype(np.bool_))]
    return allowed


def load_digirl_file(path: str | Path) -> list[list[dict[str, Any]]]:
    """Safely load a DigiRL ``.pt`` file; raises `DataError` naming the file on anything odd."""
    import torch

    p = Path(path)
    if not p.is_file():
        raise DataError(f"DigiRL trajectory file {p} does not exist")
    try:
        with torch.serialization.safe_globals(_safe_globals()):
            data = torch.load(p, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        detail = next((ln for ln in str(e).splitlines() if "GLOBAL" in ln), str(e).splitlines()[0])
        raise DataError(
            f"refused to load {p}: it holds objects outside the allow-list (tensors, numpy "
            f"arrays and plain values); {detail.strip()}"
        ) from None
    except Exception as e:
        raise DataError(
            f"cannot read DigiRL trajectory file {p}: {type(e).__name__}: {e}"
        ) from None
    return _check_structure(data, p)


def _check_structure(data: Any, p: Path) -> list[list[dict[str, Any]]]:
    if not isinstance(data, list):
        raise DataError(f"{p}: expected a list of trajectories, got {type(data).__name__}")
    for i, traj in enumerate(data):
        if not isinstance(traj, list):
            raise DataError(f"{p}: trajectory {i} is a {type(traj).__name__}, not a list of steps")
        for j, step in enumerate(traj):
            if not isinstance(step, Mapping):
                raise DataError(f"{p}: trajectory {i} step {j} is not a dict")
            missing = [k for k in REQUIRED_KEYS if k not in step]
            if missing:
                raise DataError(f"{p}: trajectory {i} step {j} lacks keys {missing}")
    return data


def _as_array(value: Any) -> np.ndarray | None:
    if value is None or isinstance(value, str):
        return None
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu().numpy()
    arr = np.asarray(value)
    return arr.astype(np.float32) if arr.dtype.kind == "f" else arr


def _image_paths(steps: list[Mapping[str, Any]]) -> list[str | None]:
    """Screenshot path of each step's observation, then of the final observation."""
    after = [str(s["image_path"]) if s.get("image_path") else None for s in steps]
    first = None
    if after and after[0]:
        m = _NUMBERED.match(after[0])
        if m and int(m.group(2)) > 0:
            first = f"{m.group(1)}{int(m.group(2)) - 1}{m.group(3)}"
    return [first, *after]


@dataclass
class ImportStats:
    """What an import did: counts, and how many screenshots were found."""

    trajectories: int = 0
    steps: int = 0
    successes: int = 0
    images_found: int = 0
    images_missing: int = 0


class _Images:
    """Screenshots read from inside ``root`` only (image paths come from untrusted files)."""

    def __init__(self, root: Path | None, stats: ImportStats) -> None:
        self.root = root.resolve() if root is not None else None
        self.stats = stats

    def _candidates(self, path: str) -> list[Path]:
        assert self.root is not None
        p = Path(path)
        out = [] if p.is_absolute() else [self.root / p]
        out.append(self.root / p.name)
        for c in out:
            if not c.resolve().is_relative_to(self.root):
                raise DataError(
                    f"image_path {path!r} leads outside image_root {self.root}: refused"
                )
        return out

    def load(self, path: str | None) -> np.ndarray | None:
        if path is None:
            return None
        if self.root is not None:
            for c in self._candidates(path):
                if c.exists():
                    return self._decode(c)
        self.stats.images_missing += 1
        return None

    def _decode(self, file: Path) -> np.ndarray | None:
        from devicerl.data.codec import decode_image

        try:
            data = read_bytes(file, MAX_IMAGE_BYTES, within=self.root, what="screenshot")
            pixels = decode_image(data)
        except (DataError, OSError) as e:
            log.warning("screenshot %s is unreadable (%s): imported without it", file, e)
            self.stats.images_missing += 1
            return None
        self.stats.images_found += 1
        return pixels


def _text(value: Any, what: str, *, optional: bool = False) -> str:
    """A text field: text as it is; ``None`` only where the field may be absent (as empty)."""
    if isinstance(value, str):
        return value
    if value is None and optional:
        return ""
    raise ValueError(f"{what} is {_kind(value)}, not text")


def _number(value: Any, what: str, bounds: tuple[float, float] | None = None) -> float:
    """A finite scalar number (within ``bounds``)."""
    arr = np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else value)
    if arr.ndim != 0 or arr.dtype.kind not in "biuf":
        raise ValueError(f"{what} is {_kind(value)}, not a number")
    x = float(arr)
    if not math.isfinite(x):
        raise ValueError(f"{what} {x} is not a finite number")
    if bounds is not None and not bounds[0] <= x <= bounds[1]:
        raise ValueError(f"{what} {x:g} is outside [{bounds[0]:g}, {bounds[1]:g}]")
    return x


def _flag(value: Any, what: str) -> bool:
    """A scalar flag: a bool, or a number that is 0 or 1."""
    x = _number(value, what)
    if x not in (0.0, 1.0):
        raise ValueError(f"{what} {x:g} is not a flag (true/false, 0/1)")
    return bool(x)


def _kind(value: Any) -> str:
    if value is None:
        return "None"
    shape = getattr(value, "shape", None)
    if shape is not None and tuple(shape) != ():
        return f"an array of shape {tuple(shape)}"
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def task_name_for(instruction: str, task_names: Mapping[str, str] | None) -> str:
    key = " ".join(instruction.lower().split())
    if task_names and key in task_names:
        return task_names[key]
    return "digirl/" + hashlib.sha1(key.encode("utf-8")).hexdigest()[:10]


def _observation(
    instruction: str, prompt: str, pixels: np.ndarray | None, feats: Any, path: str | None
) -> Observation:
    extras: dict[str, Any] = {"prompt": prompt}
    if path:
        extras["image_path"] = path
    arr = _as_array(feats)
    if arr is not None:
        extras["image_features"] = arr
    size = (int(pixels.shape[1]), int(pixels.shape[0])) if pixels is not None else (0, 0)
    return Observation(instruction, size, pixels, extras=extras)


def convert_trajectory(
    steps: list[Mapping[str, Any]],
    *,
    source: str,
    index: int,
    images: _Images,
    features: bool = True,
    task_names: Mapping[str, str] | None = None,
    source_id: str | None = None,
) -> Trajectory:
    """One reference trajectory (list of step dicts) as a `Trajectory`; a value that is not
    what DigiRL writes raises ValueError naming the step and the field. ``source_id`` (the
    file's content hash) makes the episode id; without it, ``source``."""
    instruction = _text(steps[0]["task"], "step 0: task") if steps else ""
    paths = _image_paths(steps)
    pixels = [images.load(p) for p in paths]
    traj = Trajectory(
        task=task_name_for(instruction, task_names),
        instruction=instruction,
        episode_id=uuid.uuid5(uuid.NAMESPACE_URL, f"digirl:{source_id or source}#{index}").hex,
        device="digirl-import",
        started_at=0.0,
        extras={"source": "digirl", "file": source, "index": index},
    )
    for h, d in enumerate(steps):
        at = f"step {h}"
        if _text(d["task"], f"{at}: task") != instruction:
            raise ValueError(f"{at}: task differs from step 0's")
        prompt = _text(d["observation"], f"{at}: observation", optional=True)
        feats = d.get("image_features") if features else None
        obs = _observation(instruction, prompt, pixels[h], feats, paths[h])
        obs.step = h
        info: dict[str, Any] = {}
        if "mc_return" in d:
            info["mc_return"] = _number(d["mc_return"], f"{at}: mc_return")
        if "trajectory_reward" in d:
            info["trajectory_reward"] = _number(
                d["trajectory_reward"], f"{at}: trajectory_reward", REWARD_RANGE
            )
        done = _flag(d["done"], f"{at}: done")
        info["done"] = done
        text = _text(d["action"], f"{at}: action")
        reward = _number(d["reward"], f"{at}: reward", REWARD_RANGE)
        traj.steps.append(Step(obs, parse_autoui(text), reward, done, info=info, text=text))
    if steps:
        last = steps[-1]
        feats = last.get("next_image_features") if features else None
        prompt = _text(last.get("next_observation"), "last step: next_observation", optional=True)
        traj.final_observation = _observation(instruction, prompt, pixels[-1], feats, paths[-1])
        traj.final_observation.step = len(steps)
    success = traj.total_reward > 0
    if success:
        reason = EndReason.SUCCESS
    elif traj.steps and traj.steps[-1].action.is_terminal:
        reason = EndReason.AGENT_ENDED
    else:
        reason = EndReason.MAX_STEPS
    traj.end(reason, success=success)
    traj.ended_at = None
    return traj


def iter_digirl(
    path: str | Path,
    *,
    image_root: str | Path | None = None,
    features: bool = True,
    task_names: Mapping[str, str] | None = None,
    stats: ImportStats | None = None,
) -> Iterator[Trajectory]:
    """Trajectories of a DigiRL file, converted (empty trajectories are skipped)."""
    p = Path(path)
    stats = stats if stats is not None else ImportStats()
    images = _Images(Path(image_root) if image_root else None, stats)
    data = load_digirl_file(p)
    digest = file_sha256(p)  # what episode ids are derived from
    for i, steps in enumerate(data):
        if not steps:
            continue
        try:
            t = convert_trajectory(
                steps,
                source=p.name,
                index=i,
                images=images,
                features=features,
                task_names=task_names,
                source_id=digest,
            )
        except (TypeError, ValueError, OverflowError) as e:
            raise DataError(f"{p}: trajectory {i}: {e}") from None
        stats.trajectories += 1
        stats.steps += t.length
        stats.successes += int(t.success)
        yield t


@dataclass
class StoredStats(ImportStats):
    """What `import_digirl` converted (the counts of `ImportStats`: every trajectory stored)
    and how many were left out because the store already held them."""

    already_stored: int = 0


def import_digirl(
    paths: list[str | Path],
    store_folder: str | Path,
    *,
    image_root: str | Path | None = None,
    features: bool = True,
    task_names: Mapping[str, str] | None = None,
    codec: str | None = None,
) -> StoredStats:
    """Convert DigiRL files into the store at ``store_folder`` (written 64 episodes a shard).

    Shards are written into a staging folder beside the store and moved in only once every
    file has converted, so a failure leaves the store as it was. Episode ids come from each
    file's content and the trajectory's position, so a trajectory the store already holds (the
    same file imported again, or named twice) is left out and counted in ``already_stored``;
    the other counts are of the trajectories stored now.
    """
    from devicerl.data.staging import add_to_store

    converted = ImportStats()
    stats = StoredStats()

    def count(traj: Trajectory) -> None:
        stats.trajectories += 1
        stats.steps += traj.length
        stats.successes += int(traj.success)

    def converting():
        for path in paths:
            yield from iter_digirl(path, image_root=image_root, features=features,
                                   task_names=task_names, stats=converted)  # fmt: skip

    stats.already_stored = add_to_store(store_folder, converting(), codec=codec, stored=count)
    stats.images_found, stats.images_missing = converted.images_found, converted.images_missing
    return stats
