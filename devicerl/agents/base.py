"""The policy interface every agent implements, batched over whatever devices are ready."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devicerl.actions import Action
from devicerl.errors import ConfigError
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
    acted. Trainable policies also implement `log_prob` (differentiable), save/load,
    `parameters` (for an optimiser) and `get_weights`/`set_weights` (a learner publishes weights,
    collectors load them with the learner's version).
    """

    version: int = 0
    #: True when `log_prob` is implemented (trainers refuse policies without it).
    trainable: bool = False
    #: Sampling temperature; `log_prob` uses the same temperature, so the log-prob recorded at
    #: sampling time and the recomputed one agree.
    temperature: float = 1.0
    #: True when the policy reads ``observation.previous_actions`` (the actions taken so far in
    #: the episode): collectors fill it in, learners rebuild it from the trajectory
    #: (`Trajectory.agent_observation`), so acting and `log_prob` see the same input.
    uses_history: bool = False

    @abstractmethod
    def act(
        self,
        observations: Sequence[Observation],
        greedy: bool = False,
        epsilon: Sequence[float] | None = None,
    ) -> list[ActionSample]:
        """Choose one action per observation (sampled, or the most likely with ``greedy``).

        ``epsilon``: per observation, the exploration level its episode's plan asks for (the
        share of uniform choice to mix into each part of the action); agents without such a
        notion ignore it. Collectors pass it only when exploration is on."""

    def log_prob(
        self,
        observations: Sequence[Observation],
        actions: Sequence[Action],
        texts: Sequence[str | None] | None = None,
        *,
        floor: bool = True,
        epsilon: Sequence[float] | None = None,
    ) -> torch.Tensor:
        """Log-probabilities of ``actions`` (a differentiable 1-D tensor).

        ``texts`` are the generated texts recorded with the actions (`Step.text`); text-generating
        agents score those exact texts when given, else the actions' canonical text. An agent
        that mixes a uniform exploration floor into its choices scores under the floor it acts
        with (raised to ``epsilon`` as in `act`), or with ``floor=False`` under its network's
        own distribution (agents without a floor ignore both).
        """
        raise NotImplementedError(not_trainable_message(self))

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        """The trainable parameters (for an optimiser)."""
        raise NotImplementedError(not_trainable_message(self))

    def get_weights(self) -> dict[str, Any]:
        """The weights a learner publishes to collectors (name -> CPU tensor)."""
        raise NotImplementedError(f"{type(self).__name__} has no weights to publish")

    def set_weights(self, weights: Mapping[str, Any], version: int | None = None) -> None:
        """Load published weights; ``version`` (else ``self.version + 1``) becomes the version."""
        raise NotImplementedError(f"{type(self).__name__} cannot load weights")

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

    def act(
        self,
        observations: Sequence[Observation],
        greedy: bool = False,
        epsilon: Sequence[float] | None = None,
    ) -> list[ActionSample]:
        out = list(self.fn(list(observations)))
        if len(out) != len(observations):
            raise ValueError(
                f"policy returned {len(out)} actions for {len(observations)} observations"
            )
        return [a if isinstance(a, ActionSample) else ActionSample(a) for a in out]


def check_batch(
    observations: Sequence[Observation],
    actions: Sequence[Action],
    texts: Sequence[str | None] | None = None,
) -> None:
    """`log_prob` arguments must line up one to one."""
    if len(observations) != len(actions):
        raise ValueError(f"{len(observations)} observations but {len(actions)} actions")
    if texts is not None and len(texts) != len(actions):
        raise ValueError(f"{len(texts)} texts for {len(actions)} actions")


def not_trainable_message(policy: Policy) -> str:
    return (
        f"{type(policy).__name__} has no log-probabilities: it can be evaluated, not trained "
        "(use a trainable agent such as SmallAgent or AutoUIAgent for training)"
    )


def require_trainable(policy: Policy) -> Policy:
    """Trainers call this first: a clear error for policies without log-probs (e.g. API agents)."""
    if not getattr(policy, "trainable", False):
        raise ConfigError(not_trainable_message(policy))
    return policy


def as_policy(agent: Policy | Callable[[list[Observation]], Sequence[Action]]) -> Policy:
    """A `Policy` from a policy or a plain callable."""
    return agent if isinstance(agent, Policy) else FunctionPolicy(agent)
