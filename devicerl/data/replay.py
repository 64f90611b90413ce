"""A bounded replay buffer of whole trajectories: FIFO eviction and resumable state.

Trajectory-level RL (DigiRL's critics and filters) needs whole episodes, so the buffer holds
`Trajectory` objects; learners draw their own minibatches from its contents (seeded by the
learner). Its `state_dict` holds pointers (episode ids) rather than data: with the run's
`TrajectoryStore`, a trainer restores the exact buffer after a restart without saving the
episodes twice.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from devicerl.errors import DataError
from devicerl.records import Trajectory

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from devicerl.data.store import TrajectoryStore


class ReplayBuffer:
    """At most ``capacity`` trajectories (and, if set, at most ``max_steps`` steps in total);
    the oldest go first."""

    def __init__(self, capacity: int, *, max_steps: int | None = None) -> None:
        if capacity < 1:
            raise ValueError(f"replay capacity must be >= 1, got {capacity}")
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"replay max_steps must be >= 1, got {max_steps}")
        self.capacity = capacity
        self.max_steps = max_steps
        self._items: deque[Trajectory] = deque()
        self._num_steps = 0
        self.total_added = 0
        self.total_evicted = 0

    # -- contents ---------------------------------------------------------------------------
    def add_trajectory(self, trajectory: Trajectory) -> list[Trajectory]:
        """Append one trajectory; returns the trajectories evicted to make room."""
        self._items.append(trajectory)
        self._num_steps += trajectory.length
        self.total_added += 1
        evicted = []
        while len(self._items) > self.capacity or (
            self.max_steps is not None and self._num_steps > self.max_steps and len(self._items) > 1
        ):
            old = self._items.popleft()
            self._num_steps -= old.length
            evicted.append(old)
        self.total_evicted += len(evicted)
        return evicted

    def extend(self, trajectories: Iterable[Trajectory]) -> None:
        for t in trajectories:
            self.add_trajectory(t)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Trajectory]:
        return iter(self._items)

    @property
    def num_steps(self) -> int:
        return self._num_steps

    def clear(self) -> None:
        self._items.clear()
        self._num_steps = 0

    # -- resume -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Pointers (episode ids, oldest first) and counters; JSON-serialisable."""
        return {
            "capacity": self.capacity,
            "max_steps": self.max_steps,
            "episode_ids": [t.episode_id for t in self._items],
            "total_added": self.total_added,
            "total_evicted": self.total_evicted,
        }

    def load_state_dict(
        self, state: dict[str, Any], store: TrajectoryStore, *, strict: bool = True
    ) -> None:
        """Restore contents from ``store`` and the counters. The episodes must be there,
        unless ``strict=False``: then those the store lacks (a shard skipped as corrupt) are
        left out with a warning."""
        ids = list(state["episode_ids"])
        if not strict:
            known = set(store.index().column("episode_id").to_pylist())
            ids = [e for e in ids if e in known]
            if len(ids) < len(state["episode_ids"]):
                logger.warning(
                    "replay buffer: %d of %d episodes are not readable in %s; restored without",
                    len(state["episode_ids"]) - len(ids),
                    len(state["episode_ids"]),
                    store.folder,
                )
        trajectories = store.load(ids)
        if len(trajectories) != len(ids):
            raise DataError(
                f"replay state lists {len(ids)} episodes, store {store.folder} has "
                f"{len(trajectories)} of them"
            )
        self.capacity = int(state["capacity"])
        self.max_steps = state.get("max_steps")
        self.clear()
        for t in trajectories:
            self._items.append(t)
            self._num_steps += t.length
        self.total_added = int(state["total_added"])
        self.total_evicted = int(state["total_evicted"])

    @classmethod
    def from_store(
        cls,
        store: TrajectoryStore,
        capacity: int,
        *,
        max_steps: int | None = None,
        **filters: Any,
    ) -> ReplayBuffer:
        """A buffer holding the newest episodes of ``store`` (``task``, ``success``,
        ``end_reason`` filters as in `TrajectoryStore.iter_trajectories`), e.g. to start
        off-to-online training from imported data. Only those episodes are read."""
        from devicerl.data.store import episode_filter

        index = store.index()
        where = episode_filter(**filters)
        if where is not None:
            index = index.filter(where(index))
        buf = cls(capacity, max_steps=max_steps)
        buf.extend(store.load(index.column("episode_id").to_pylist()[-capacity:]))
        return buf
