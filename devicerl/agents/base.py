"""The policy interface every agent implements, batched over whatever devices are ready."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devicerl.actions import Action
from devicerl.records import Observation

if TYPE_CHECKING:
    import torch


@dataclass
class ActionSample:
    """One chosen action: the action, the generated text (if any), its log-prob and extras."""

    action: Action
    text: str | None = None
    log_prob: float | None = None
    extras: dict[str, Any] = field(default_factory=dict)


class Policy(ABC):
    """Maps a batch of observations to a batch of `ActionSample`.

    ``version`` increases each time new weights are loaded, so every step records which policy
    acted. Trainable policies also implement `log_prob` (differentiable) and save/load.
    """

    version: int = 0
    #: True when `log_prob` is implemented (trainers refuse policies without it).
    trainable: bool = False

    @abstractmethod
    def act(self, observations: Sequence[Observation], greedy: bool = False) -> list[ActionSample]:
        """Choose one action per observation (sampled, or the most likely with ``greedy``)."""

    def log_prob(
        self, observations: Sequence[Observation], actions: Sequence[Action]
    ) -> torch.Tensor:
        """Log-probabilities of ``actions`` (a differentiable 1-D tensor)."""
        raise NotImplementedError(
            f"{type(self).__name__} has no log-probabilities: it can be evaluated, not trained"
        )

    def save(self, path: str | Path) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot be saved")

    def load(self, path: str | Path) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot be loaded")

    def __call__(self, observations: Sequence[Observation]) -> list[ActionSample]:
        return self.act(observations)


class FunctionPolicy(Policy):
    """Wraps a callable ``list[Observation] -> list[Action]`` (or -> list[ActionSample])."""

    def __init__(self, fn: Callable[[list[Observation]], Sequence[Action | ActionSample]]) -> None:
        self.fn = fn

    def act(self, observations: Sequence[Observation], greedy: bool = False) -> list[ActionSample]:
        out = list(self.fn(list(observations)))
        if len(out) != len(observations):
            raise ValueError(
                f"policy returned {len(out)} actions for {len(observations)} observations"
            )
        return [a if isinstance(a, ActionSample) else ActionSample(a) for a in out]


def as_policy(agent: Policy | Callable[[list[Observation]], Sequence[Action]]) -> Policy:
    """A `Policy` from a policy or a plain callable."""
    return agent if isinstance(agent, Policy) else FunctionPolicy(agent)
