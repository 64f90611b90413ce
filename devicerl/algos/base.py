"""What every learner shares: a selection of the replay (`devicerl.algos.selection`), the
actor's loss part, and the bookkeeping a checkpoint saves.

A learner turns a replay of trajectories into parameter updates. It sees policies, critics and
tensors only — never devices, pools or processes — so the same update runs offline from a stored
dataset or online beside an asynchronous collector.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from devicerl.agents.base import Policy, require_trainable
from devicerl.algos.grad_sync import GradSync
from devicerl.records import Trajectory


def usable(trajectories: Sequence[Trajectory]) -> list[Trajectory]:
    """Trajectories that can teach: with steps, ended by the task or the agent, never by
    infrastructure (a truncated episode says nothing about the agent)."""
    return [t for t in trajectories if t.steps and t.is_complete and not t.is_truncated]


class Learner(ABC):
    """Updates an actor (and possibly critics) from trajectories. Subclasses build their
    parts in ``__init__`` and list them in `parts`."""

    name = "learner"

    def __init__(self, actor: Policy, seed: int = 0) -> None:
        self.actor = require_trainable(actor)
        featurizer = getattr(actor, "featurizer", None)
        if featurizer is not None and hasattr(featurizer, "enable_cache"):
            featurizer.enable_cache()  # replay observations are featurized again and again
        self.rng = random.Random(seed)
        self.updates_done = 0
        self._grad_sync = GradSync()

    @property
    def grad_sync(self) -> GradSync:
        return self._grad_sync

    @grad_sync.setter
    def grad_sync(self, sync: GradSync) -> None:
        """Learn data-parallel (the runtime sets this): every part syncs through ``sync``."""
        self._grad_sync = sync
        for part in self.parts():
            part.grad_sync = sync

    def parts(self) -> list[Any]:
        """The loss parts (each with ``grad_sync`` and optimizers)."""
        return []

    @abstractmethod
    def update(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        """One iteration of updates from the replay; returns namespaced metrics."""

    def modules(self) -> dict[str, nn.Module]:
        """Named modules whose weights a checkpoint must hold (the actor is saved apart)."""
        return {}

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {"updates_done": self.updates_done, "rng": list(self.rng.getstate()[1])}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.updates_done = int(state.get("updates_done", 0))
        if "rng" in state:
            self.rng.setstate((3, tuple(state["rng"]), None))
