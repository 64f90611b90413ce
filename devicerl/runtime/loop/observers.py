"""Hooks into the training loop: what an observer of `devicerl.runtime.loop.trainer.Trainer` sees
and may change (a league is one: `devicerl.runtime.loop.league.LeagueRun`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from devicerl.runtime.acting.planning import PolicyAssignment
from devicerl.runtime.loop.population import Population
from devicerl.runtime.runs.folder import RunDir
from devicerl.runtime.setup.config import TrainConfig


class TrainingRun(Protocol):
    """The parts of a running trainer that observers read and change."""

    cfg: TrainConfig
    run_dir: RunDir
    population: Population
    #: the policy assignment new episodes are planned with (None: the single policy)
    assignment: PolicyAssignment | None
    #: the members new episodes can go to (None: every member)
    routed: set[str] | None
    #: the member evaluated at the end
    eval_name: str

    @property
    def iteration(self) -> int: ...

    def publish(self) -> None:
        """Send the current members to the collection source now."""
        ...


class TrainerObserver:
    """Hooks into the training loop (every method is optional)."""

    def on_episode(self, run: TrainingRun, t: Any) -> None:
        """A complete, labelled episode was stored (before it is routed to the replays)."""

    def after_iteration(self, run: TrainingRun, metrics: dict[str, Any]) -> None:
        """An iteration's updates are done (before the new policies are published); add to
        ``metrics`` what the observer measures."""

    def on_checkpoint(self, run: TrainingRun, folder: Path) -> None:
        """Write the observer's own state into a checkpoint being written (``folder``)."""

    def on_restore(self, run: TrainingRun, folder: Path) -> None:
        """Read it back from the checkpoint being restored, before the members' weights."""

    def on_end(self, run: TrainingRun) -> None:
        """Training is over (agents are being saved)."""

    def summary(self, run: TrainingRun) -> dict[str, Any]:
        """What to add to ``summary.json``."""
        return {}
