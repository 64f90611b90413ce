"""Atomic, safe checkpoints: weights as safetensors, optimizers, trainer state, RNG states.

Layout under ``<run>/checkpoints/``::

    iter-000012/            one complete checkpoint (never modified after it is published)
      <model>.safetensors   weights of each named model
      <optim>.optim.pt      optimizer state dicts (tensors + numbers; loaded weights_only=True)
      rng.safetensors       torch's CPU RNG state
      state.json            trainer state, Python/NumPy RNG states, data pointers, manifest
      league/               a league run's state (`devicerl.league.persist`), in the manifest
    latest                  name of the newest complete checkpoint
    corrupt-iter-000013/    a checkpoint that failed verification, set aside (never loaded)

A checkpoint is written into a temporary folder, fsynced, renamed into place, then ``latest`` is
replaced atomically (temp + rename). A kill at any moment leaves either the previous or the new
checkpoint published, never a half-written one. The manifest in ``state.json`` holds every
file's size and sha256, and ``state.json`` carries the sha256 of its own content, so any
corruption (a truncated file, a byte flipped in tensor data) is found before anything is loaded.
`load_latest` falls back to an older checkpoint, naming the corrupt file, if the newest does not
verify. ``latest`` always names a published checkpoint: pruning never removes the one it names.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from devicerl.errors import DataError
from devicerl.files import file_sha256

log = logging.getLogger(__name__)

LATEST = "latest"
CORRUPT_PREFIX = "corrupt-"


def _state_digest(state: dict[str, Any]) -> str:
    """sha256 of the state's canonical JSON (what state.json holds, minus this digest)."""
    text = json.dumps(state, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _iteration_of(path: Path) -> int:
    try:
        return int(path.name.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return -1


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def atomic_write_text(path: Path, text: str) -> None:
    """Write a small text file atomically (temp + fsync + rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def rng_state() -> dict[str, Any]:
    """Python and NumPy global RNG states as JSON-friendly data (torch's is saved apart)."""
    py = random.getstate()
    return {
        "python": [py[0], list(py[1]), py[2]],
        "numpy": _np_state_to_json(np.random.get_state()),
    }


def _np_state_to_json(state: tuple) -> list:
    name, keys, pos, has_gauss, cached = state
    return [name, keys.tolist(), int(pos), int(has_gauss), float(cached)]


def set_rng_state(state: dict[str, Any], torch_state: torch.Tensor | None) -> None:
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    if torch_state is not None:
        torch.set_rng_state(torch_state)


def _files(root: Path) -> dict[str, Path]:
    """Every file under ``root`` by its path relative to it (``a.safetensors``,
    ``league/league.json``)."""
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}


@dataclass
class Checkpoint:
    """A loaded checkpoint."""

    path: Path
    iteration: int
    models: dict[str, dict[str, torch.Tensor]]
    optimizers: dict[str, dict[str, Any]]
    state: dict[str, Any]

    def restore_rng(self) -> None:
        torch_rng = None
        rng_file = self.path / "rng.safetensors"
        if rng_file.exists():
            torch_rng = load_file(str(rng_file))["torch"]
        if "rng" in self.state:
            set_rng_state(self.state["rng"], torch_rng)


class CheckpointManager:
    """Saves and loads checkpoints of a run, keeping the newest ``keep`` of them."""

    def __init__(self, root: str | Path, keep: int = 3) -> None:
        self.root = Path(root)
        self.keep = max(1, keep)

    def save(
        self,
        iteration: int,
        models: dict[str, dict[str, torch.Tensor]],
        optimizers: dict[str, dict[str, Any]],
        state: dict[str, Any],
        extra: Callable[[Path], None] | None = None,
    ) -> Path:
        """Write and publish checkpoint ``iteration``; returns its folder. ``extra`` writes
        more files into the unpublished folder (a league's state in a sub-folder); they are in
        the manifest and published atomically with the rest."""
        self.root.mkdir(parents=True, exist_ok=True)
        name = f"iter-{iteration:06d}"
        final = self.root / name
        tmp = self.root / f".tmp-{name}-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        for key, sd in models.items():
            tensors = {k: v.detach().cpu().contiguous() for k, v in sd.items()}
            save_file(tensors, str(tmp / f"{key}.safetensors"))
        for key, osd in optimizers.items():
            torch.save(osd, tmp / f"{key}.optim.pt")
        save_file({"torch": torch.get_rng_state()}, str(tmp / "rng.safetensors"))
        if extra is not None:
            extra(tmp)
        full_state = dict(state, iteration=iteration, rng=rng_state())
        full_state["manifest"] = {
            name: {"size": p.stat().st_size, "sha256": file_sha256(p)}
            for name, p in _files(tmp).items()
        }
        full_state = json.loads(json.dumps(full_state))  # the digest is of what is read back
        full_state["state_sha256"] = _state_digest(full_state)
        (tmp / "state.json").write_text(json.dumps(full_state, indent=1), encoding="utf-8")
        for p in _files(tmp).values():
            _fsync_file(p)
        for d in [p for p in tmp.rglob("*") if p.is_dir()]:
            _fsync_dir(d)
        _fsync_dir(tmp)
        if final.exists():  # a re-run of the same iteration after a resume
            self._discard(final)
        os.replace(tmp, final)
        _fsync_dir(self.root)
        atomic_write_text(self.root / LATEST, name)
        self._prune(final)
        return final

    def _discard(self, path: Path) -> None:
        """Unpublish `path` atomically (rename), then delete it: a kill mid-way never leaves a
        half-deleted folder under a published name."""
        trash = self.root / f".tmp-trash-{path.name}-{os.getpid()}"
        if trash.exists():
            shutil.rmtree(trash, ignore_errors=True)
        os.replace(path, trash)
        _fsync_dir(self.root)
        shutil.rmtree(trash, ignore_errors=True)

    def _prune(self, current: Path) -> None:
        """Keep ``current`` (what ``latest`` names) and the ``keep - 1`` checkpoints before it.

        Checkpoints of later iterations than ``current`` belong to a branch of the run that was
        abandoned (a resume from an older checkpoint) and go too.
        """
        done = self.published()
        now = _iteration_of(current)
        for p in done:
            if _iteration_of(p) > now:
                log.warning("removing checkpoint %s: later than the one just written", p)
                self._discard(p)
        older = [p for p in done if _iteration_of(p) < now]
        for old in older[: max(0, len(older) - (self.keep - 1))]:
            self._discard(old)
        for stale in self.root.glob(".tmp-*"):
            if not stale.name.endswith(f"-{os.getpid()}"):
                shutil.rmtree(stale, ignore_errors=True)

    def published(self) -> list[Path]:
        """Published checkpoints, oldest first."""
        found = (p for p in self.root.glob("iter-*") if p.is_dir() and _iteration_of(p) >= 0)
        return sorted(found, key=_iteration_of)

    def _verify(self, path: Path) -> dict[str, Any]:
        """The checkpoint's state once every file matches the manifest (else `DataError`)."""
        state_file = path / "state.json"
        try:
            state = json.loads(state_file.read_text(encoding="utf-8"))
            if not isinstance(state, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as e:
            raise DataError(f"checkpoint file {state_file} is unreadable: {e}") from None
        digest = state.pop("state_sha256", None)
        if digest is not None and digest != _state_digest(state):
            raise DataError(f"checkpoint file {state_file} is corrupt (sha256 mismatch)")
        manifest = state.get("manifest", {})
        for fname, entry in manifest.items():
            f = path / fname
            if isinstance(entry, int):  # checkpoints written before hashes: sizes only
                size, sha = entry, None
            else:
                size, sha = entry["size"], entry["sha256"]
            if not f.is_file() or f.stat().st_size != size:
                raise DataError(f"checkpoint file {f} is missing or truncated")
            if sha is not None and file_sha256(f) != sha:
                raise DataError(f"checkpoint file {f} is corrupt (sha256 mismatch)")
        return state

    def load(self, path: str | Path) -> Checkpoint:
        path = Path(path)
        state = self._verify(path)
        manifest = state.get("manifest", {})
        hashed = any(isinstance(e, dict) for e in manifest.values())
        unlisted = [n for n in _files(path) if n != "state.json"]
        unlisted = [n for n in unlisted if hashed and n not in manifest]
        if unlisted:
            raise DataError(f"checkpoint file {path / unlisted[0]} is not in its manifest")
        models, optimizers = {}, {}
        for f in path.glob("*.safetensors"):
            if f.name != "rng.safetensors":
                try:
                    models[f.stem] = load_file(str(f))
                except Exception as e:
                    raise DataError(f"checkpoint file {f} is corrupt: {e}") from None
        for f in path.glob("*.optim.pt"):
            try:
                optimizers[f.name[: -len(".optim.pt")]] = torch.load(f, weights_only=True)
            except Exception as e:
                raise DataError(f"checkpoint file {f} is corrupt: {e}") from None
        return Checkpoint(path, int(state["iteration"]), models, optimizers, state)

    def load_latest(self, *, set_aside: bool = False) -> Checkpoint | None:
        """The newest checkpoint that verifies (None when there is none).

        With ``set_aside`` (the run's owner, holding its lock) a checkpoint that fails is
        renamed ``corrupt-iter-N`` and ``latest`` is pointed at the one loaded instead.
        """
        candidates = self.published()
        pointer = self.root / LATEST
        if pointer.exists():
            named = self.root / pointer.read_text(encoding="utf-8", errors="replace").strip()
            if named in candidates:
                candidates.remove(named)
                candidates.append(named)
        failed = False
        for path in reversed(candidates):
            try:
                ck = self.load(path)
            except DataError as e:
                failed = True
                log.warning("skipping corrupt checkpoint %s: %s", path.name, e)
                if set_aside:
                    self._set_aside(path)
                continue
            if failed:
                log.warning("falling back to the previous good checkpoint %s", path.name)
                if set_aside:
                    atomic_write_text(pointer, path.name)
            return ck
        return None

    def _set_aside(self, path: Path) -> None:
        target = self.root / f"{CORRUPT_PREFIX}{path.name}"
        n = 1
        while target.exists():
            n += 1
            target = self.root / f"{CORRUPT_PREFIX}{path.name}-{n}"
        os.replace(path, target)
        _fsync_dir(self.root)
        log.warning("set the corrupt checkpoint aside as %s", target)
