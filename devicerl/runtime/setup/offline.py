"""Given data for offline training: ``offline_data`` read into trajectories."""

from __future__ import annotations

from devicerl.errors import ConfigError
from devicerl.records import Trajectory


def load_offline(spec: str) -> list[Trajectory]:
    """Trajectories from run folders, stores or DigiRL ``.pt`` files (comma-separated)."""
    from devicerl.data.digirl_import import iter_digirl
    from devicerl.data.store import TrajectoryStore
    from devicerl.runtime.runs.folder import find_store

    out: list[Trajectory] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        if part.endswith(".pt"):
            out.extend(iter_digirl(part))
        else:
            out.extend(TrajectoryStore(find_store(part)).read_all())
    if not out:
        raise ConfigError(f"offline_data {spec!r} holds no trajectories")
    return out
