"""A bounded replay buffer of whole trajectories, with FIFO eviction and resumable state.

Trajectory-level RL (DigiRL's critics and filters) needs whole episodes, so the buffer holds
`Trajectory` objects and samples either trajectories or individual steps. Its `state_dict`
holds pointers (episode ids) rather than data: with the run's `TrajectoryStore`, a trainer
restores the exact buffer after a restart without saving the episodes twice.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from devicerl.errors import DataError
from devicerl.records import Step, Trajectory

if TYPE_CHECKING:
    from devicerl.data.store import TrajectoryStore


@dataclass(frozen=True)
class StepRef:
    """One sampled step: the trajectory it belongs to and its index there."""

    trajectory: Trajectory
    index: int

    @property
    def step(self) -> Step:
        return self.trajectory.steps[self.index]

    @property
    def is_last(self) -> bool:
        return self.index == self.trajectory.length - 1


class ReplayBuffer:
    """At most ``capacity`` trajectories (and, if set, at most ``max_steps`` steps in total);
    the oldest go first. Sampling is uniform (with replacement) and seeded."""

    def __init__(self, capacity: int, *, max_steps: int | None = None, seed: int = 0) -> None:
        if capacity < 1:
            raise ValueError(f"replay capacity must be >= 1, got {capacity}")
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"replay max_steps must be >= 1, got {max_steps}")
        self.capacity = capacity
        self.max_steps = max_steps
        self._items: deque[Trajectory] = deque()
        self._num_steps = 0
        self._rng = random.Random(seed)
        self.total_added = 0
        self.total_evicted = 0

    # -- contents ---------------------------------------------------------------------------
    def add(self, trajectory: Trajectory) -> list[Trajectory]:
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
            self.add(t)

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

    # -- sampling ---------------------------------------------------------------------------
    def sample_trajectories(self, n: int) -> list[Trajectory]:
        """``n`` trajectories drawn uniformly with replacement."""
        if not self._items:
            raise ValueError("cannot sample from an empty replay buffer")
        return [self._items[self._rng.randrange(len(self._items))] for _ in range(n)]

    def sample_steps(self, n: int) -> list[StepRef]:
        """``n`` steps drawn uniformly over all steps in the buffer (with replacement)."""
        if self._num_steps == 0:
            raise ValueError("cannot sample steps: the replay buffer holds no steps")
        picks = sorted(self._rng.randrange(self._num_steps) for _ in range(n))
        out: list[StepRef] = []
        offset, it = 0, iter(self._items)
        current = next(it)
        for p in picks:
            while p >= offset + current.length:
                offset += current.length
                current = next(it)
            out.append(StepRef(current, p - offset))
        self._rng.shuffle(out)
        return out

    # -- resume -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Pointers (episode ids, oldest first), counters and RNG state; JSON-serialisable."""
        return {
            "capacity": self.capacity,
            "max_steps": self.max_steps,
            "episode_ids": [t.episode_id for t in self._items],
            "total_added": self.total_added,
            "total_evicted": self.total_evicted,
            "rng": _rng_to_json(self._rng.getstate()),
        }

    def load_state_dict(self, state: dict[str, Any], store: TrajectoryStore) -> None:
        """Restore contents from ``store`` (the episodes must be there) and the RNG state."""
        ids = list(state["episode_ids"])
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
        self._rng.setstate(_rng_from_json(state["rng"]))

    @classmethod
    def from_store(
        cls,
        store: TrajectoryStore,
        capacity: int,
        *,
        max_steps: int | None = None,
        seed: int = 0,
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
        buf = cls(capacity, max_steps=max_steps, seed=seed)
        buf.extend(store.load(index.column("episode_id").to_pylist()[-capacity:]))
        return buf


def _rng_to_json(state: tuple) -> list:
    version, internal, gauss = state
    return [version, list(internal), gauss]


def _rng_from_json(state: list) -> tuple:
    version, internal, gauss = state
    return (version, tuple(internal), gauss)
