"""Writing a dataset all at once or not at all: imported trajectories added to a store
(`add_to_store`), an export's new folder (`new_folder`).

Shards are written into a staging folder beside the store and moved in only once every
trajectory has converted, so a failure half-way leaves the store as it was. A trajectory whose
episode id the store already holds (the same data imported again) is left out and counted.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from devicerl.records import Trajectory


def add_to_store(
    folder: str | Path,
    trajectories: Iterable[Trajectory],
    *,
    codec: str | None = None,
    stored: Callable[[Trajectory], None] | None = None,
) -> int:
    """Store ``trajectories`` in the store at ``folder`` (64 episodes a shard); ``stored`` is
    called for each one written. Returns how many were left out as already stored."""
    from devicerl.data.store import TrajectoryStore, TrajectoryWriter

    folder = Path(folder)
    kw = {"codec": codec} if codec else {}
    existing: set[str] = set()
    if folder.is_dir():
        existing = set(TrajectoryStore(folder).index().column("episode_id").to_pylist())
    already = 0
    stage = folder.parent / f".{folder.name}.importing-{uuid.uuid4().hex[:8]}"
    try:
        with TrajectoryWriter(stage, flush_every=64, flush_interval_s=None, **kw) as writer:
            for traj in trajectories:
                if traj.episode_id in existing:
                    already += 1
                    continue
                existing.add(traj.episode_id)
                writer.append(traj)
                if stored is not None:
                    stored(traj)
        folder.mkdir(parents=True, exist_ok=True)
        for f in sorted(stage.iterdir()):  # manifest-* before shard-*: shards land listed
            os.replace(f, folder / f.name)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return already


@contextmanager
def new_folder(out: str | Path) -> Iterator[Path]:
    """A folder built beside the new folder ``out`` and renamed to it when the block ends; an
    error in the block removes it, so ``out`` appears whole or not at all."""
    out = Path(out)
    if out.exists():
        raise FileExistsError(f"{out} exists")
    work = out.with_name(f".{out.name}.exporting-{uuid.uuid4().hex[:8]}")
    work.mkdir(parents=True)
    try:
        yield work
        os.rename(work, out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
