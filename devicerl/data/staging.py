"""Adding imported trajectories to a store all at once or not at all.

Shards are written into a staging folder beside the store and moved in only once every
trajectory has converted, so a failure half-way leaves the store as it was. A trajectory whose
episode id the store already holds (the same data imported again) is left out and counted.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterable
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
