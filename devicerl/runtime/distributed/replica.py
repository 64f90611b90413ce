"""One process's copy of the learner, and what travels between the trainer and the replicas.

The trainer keeps the replay buffer; a replica keeps a mirror of it, fed with `ReplayDelta`s
(the trajectories it has not seen yet and the buffer's order), so each update ships only new
data. A replica learns with a `DataParallelSync`, so every replica ends each update with the
same parameters; the full `LearnerState` travels only when a group starts (or restarts from a
checkpoint) and when the trainer checkpoints.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from devicerl.agents.base import Policy
from devicerl.algos.base import Learner
from devicerl.algos.grad_sync import GradSync
from devicerl.records import Trajectory

log = logging.getLogger(__name__)


@dataclass
class LearnerState:
    """Everything that makes two learners identical: weights, optimizers, counters and RNG."""

    actor: dict[str, torch.Tensor]
    version: int
    modules: dict[str, dict[str, torch.Tensor]]
    optimizers: dict[str, dict[str, Any]]
    learner: dict[str, Any]

    @classmethod
    def of(cls, actor: Policy, learner: Learner) -> LearnerState:
        cpu = _to_cpu
        return cls(
            actor=actor.get_weights(),
            version=int(actor.version),
            modules={k: cpu(m.state_dict()) for k, m in learner.modules().items()},
            optimizers={k: cpu(o.state_dict()) for k, o in learner.optimizers().items()},
            learner=learner.state_dict(),
        )

    def apply(self, actor: Policy, learner: Learner) -> None:
        actor.set_weights(self.actor, self.version)
        for name, module in learner.modules().items():
            module.load_state_dict(self.modules[name])
        for name, opt in learner.optimizers().items():
            opt.load_state_dict(self.optimizers[name])  # moves state to the params' device
        learner.load_state_dict(self.learner)


def fingerprint(actor: Policy, learner: Learner) -> float:
    """A number that differs when two replicas' parameters do (sum and abs-sum, float64)."""
    total = 0.0
    params = [*actor.parameters(), *(p for m in learner.modules().values() for p in m.parameters())]
    with torch.no_grad():
        for i, p in enumerate(params):
            d = p.detach().double()
            total += float(d.sum()) + (i + 1) * float(d.abs().sum())
    return total


def _to_cpu(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj


@dataclass
class ReplayDelta:
    """The replay as the trainer sees it now: new trajectories plus the order of all of them."""

    new: list[Trajectory]
    order: list[str]
    version: int


@dataclass
class DeltaEncoder:
    """Trainer side: remembers which trajectories the replicas already hold."""

    sent: set[str] = field(default_factory=set)

    def encode(self, trajectories: Sequence[Trajectory], version: int) -> ReplayDelta:
        new = [t for t in trajectories if t.episode_id not in self.sent]
        order = [t.episode_id for t in trajectories]
        self.sent = set(order)
        return ReplayDelta(new, order, version)

    def reset(self) -> None:
        """The replicas start over (a new group): send everything next time."""
        self.sent = set()


class LearnerReplica:
    """A learner built from the run's config, learning with ``grad_sync`` on mirrored data."""

    def __init__(self, cfg: Any, grad_sync: GradSync, device: torch.device | None = None) -> None:
        from devicerl.runtime.setup.learners import make_learner, seed_everything, set_torch_threads

        set_torch_threads()
        seed_everything(cfg.seed)
        spec = cfg.agent
        if device is not None and device.type != "cpu":
            spec = dataclasses.replace(spec, device=str(device))
        self.actor = spec.make()
        learner = make_learner(cfg, self.actor)
        if learner is None:
            raise ValueError(f"algo {cfg.algo!r} has no learner to run on several processes")
        self.learner = learner
        self.learner.grad_sync = grad_sync
        self.mirror: dict[str, Trajectory] = {}

    def load_state(self, state: LearnerState) -> None:
        state.apply(self.actor, self.learner)

    def state(self) -> LearnerState:
        return LearnerState.of(self.actor, self.learner)

    def update(self, delta: ReplayDelta) -> dict[str, float]:
        for t in delta.new:
            self.mirror[t.episode_id] = t
        missing = [i for i in delta.order if i not in self.mirror]
        if missing:
            raise RuntimeError(
                f"learner replica lacks {len(missing)} trajectories, e.g. {missing[0]}"
            )
        data = [self.mirror[i] for i in delta.order]
        self.mirror = {t.episode_id: t for t in data}  # evicted ones go
        self.actor.version = delta.version
        return self.learner.update(data)

    def fingerprint(self) -> float:
        return fingerprint(self.actor, self.learner)
