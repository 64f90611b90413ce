"""Hooks into the training loop: what an observer of `devicerl.runtime.loop.trainer.Trainer` sees,
and the one way it changes the run.

An observer is registered with `Trainer.register_observer` (`devicerl.runtime.loop.factory.
make_trainer` registers the ones a config names: a league's
`devicerl.runtime.loop.league.LeagueRun`). It reads the run through `TrainingRun` and changes
it only through what its hooks return, a `Steering` record the loop applies, or through the
trainer's public methods (`TrainingRun`); it never writes the trainer's attributes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from devicerl.agents.base import Policy
from devicerl.records import DEFAULT_POLICY
from devicerl.runtime.acting.planning import PolicyAssignment
from devicerl.runtime.loop.population import Member, Population
from devicerl.runtime.runs.folder import RunDir
from devicerl.runtime.setup.config import TrainConfig


def own_replay(policy: str) -> list[str]:
    """A single-policy run's routing: a policy's episodes go to its own replay."""
    return [policy]


@dataclass(frozen=True)
class Steering:
    """How the loop plans, routes and evaluates. An observer returns one with the fields it
    changes; a field left None stays as it is (`Trainer.steer` applies it). The trainer's own
    (`Trainer.steering`) starts as `SINGLE_POLICY`, where ``routed`` None means every member."""

    #: how a new episode's policy is chosen (a league's mapping or frontier sampling)
    assignment: PolicyAssignment | None = None
    #: the members new episodes may be planned for (they get acting copies)
    routed: frozenset[str] | None = None
    #: the replays a policy's finished episodes go to (its own, and a league's students')
    destinations: Callable[[str], list[str]] | None = None
    #: the member evaluated at the end
    evaluated: str | None = None


#: The loop's steering before any observer asks for more: one policy, its own replay.
SINGLE_POLICY = Steering(None, None, own_replay, DEFAULT_POLICY)


class TrainingRun(Protocol):
    """The parts of a running trainer that observers read, and the methods they may call."""

    cfg: TrainConfig
    run_dir: RunDir
    population: Population  #: read only: members change through the methods below
    steering: Steering  #: read only: changes through `steer`

    @property
    def iteration(self) -> int: ...

    def steer(self, steering: Steering | None) -> None:
        """Apply ``steering`` now (the collector sees new routing at the next `publish`)."""
        ...

    def publish(self) -> None:
        """Send the current members to the collection source now."""
        ...

    def add_member(
        self,
        name: str,
        policy: Policy,
        cfg: TrainConfig,
        make: Callable[[], Policy],
        **options: Any,
    ) -> Member:
        """Add (or rebuild) a member (`devicerl.runtime.loop.population.Population.add_member`)."""
        ...

    def remove_member(self, name: str) -> None: ...


class TrainerObserver:
    """Hooks into the training loop (every method is optional)."""

    def attach(self, run: TrainingRun) -> Steering | None:
        """The observer was registered (before a resume restores the run)."""
        return None

    def on_episode(self, run: TrainingRun, t: Any) -> None:
        """A complete, labelled episode was stored (before it is routed to the replays)."""

    def after_iteration(self, run: TrainingRun, metrics: Mapping[str, Any]) -> Steering | None:
        """An iteration's updates are done (``metrics``: the loop's, so far), before the new
        policies are published."""
        return None

    def iteration_metrics(self, run: TrainingRun) -> dict[str, float]:
        """What the observer measured this iteration, logged with the loop's metrics."""
        return {}

    def on_checkpoint(self, run: TrainingRun, folder: Path) -> None:
        """Write the observer's own state into a checkpoint being written (``folder``)."""

    def on_restore(self, run: TrainingRun, folder: Path) -> Steering | None:
        """Read it back from the checkpoint being restored, before the members' weights."""
        return None

    def on_end(self, run: TrainingRun) -> None:
        """Training is over (agents are being saved)."""

    def summary(self, run: TrainingRun) -> dict[str, Any]:
        """What to add to ``summary.json``."""
        return {}
