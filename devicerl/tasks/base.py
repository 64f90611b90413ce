"""Task samplers (which task comes next). The task types themselves (`Task`, `TaskInstance`)
live in `devicerl.records`, below the devices, and are re-exported here."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from devicerl.errors import TaskError
from devicerl.records import Task, TaskInstance

__all__ = ["Task", "TaskInstance", "TaskSampler"]


#: Disjoint ranges of instance seeds: training draws from ``train``; evaluation while developing
#: uses ``validation``; reported results use ``test``, never used for a decision.
SEED_RANGES: dict[str, tuple[int, int]] = {
    "train": (0, 2**30),
    "validation": (2**30, 3 * 2**29),
    "test": (3 * 2**29, 2**31),
}


class TaskSampler:
    """Hands out (task, seed) instances, randomly or in order.

    ``mode="random"`` draws tasks uniformly with a seeded RNG; ``mode="sequential"`` walks the
    list in order (the first N tasks of a split, as DigiRL's evaluation does) and, with
    ``cycle=False``, stops after one pass (`next` returns None). Seeds come from the sampler's
    RNG, so a sampler with the same seed yields the same instances; ``seeds`` bounds them to a
    range (a name of `SEED_RANGES` or ``(lo, hi)``), so training and test instances never meet.
    """

    def __init__(
        self,
        tasks: Sequence[Task],
        mode: Literal["random", "sequential"] = "random",
        seed: int = 0,
        cycle: bool = True,
        max_steps: int | None = None,
        seeds: tuple[int, int] | str | None = None,
    ) -> None:
        if not tasks:
            raise TaskError("task sampler needs at least one task")
        if mode not in ("random", "sequential"):
            raise TaskError(f"unknown sampling mode {mode!r} (use 'random' or 'sequential')")
        self.tasks = [t.with_max_steps(max_steps) if max_steps else t for t in tasks]
        self.mode = mode
        self.cycle = cycle
        self._rng = random.Random(seed)
        self._index = 0
        if isinstance(seeds, str) and seeds not in SEED_RANGES:
            raise TaskError(f"unknown seed range {seeds!r}; choose from {', '.join(SEED_RANGES)}")
        lo, hi = SEED_RANGES[seeds] if isinstance(seeds, str) else seeds or (0, 2**31)
        if not 0 <= lo < hi:
            raise TaskError(f"instance seed range must satisfy 0 <= lo < hi, got {(lo, hi)}")
        self.seed_range = (lo, hi)

    def next(self) -> TaskInstance | None:
        if self.mode == "random":
            task = self._rng.choice(self.tasks)
        else:
            if self._index >= len(self.tasks) and not self.cycle:
                return None
            task = self.tasks[self._index % len(self.tasks)]
            self._index += 1
        lo, hi = self.seed_range
        return TaskInstance(task, lo + self._rng.randrange(hi - lo))

    @property
    def exhausted(self) -> bool:
        return self.mode == "sequential" and not self.cycle and self._index >= len(self.tasks)

    def __iter__(self) -> Iterator[TaskInstance]:
        while (inst := self.next()) is not None:
            yield inst

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue the same sequence after a restart."""
        return {"index": self._index, "rng": self._rng.getstate()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._index = int(state["index"])
        rng_state = state["rng"]
        self._rng.setstate((rng_state[0], tuple(rng_state[1]), rng_state[2]))
