"""What a head of the small agent is, and what every part of its action shares.

An action is a path through three kinds of parts: its type (`TypeHead`), then, for a type that
has heads, one option of the type's router (`Router`: the gesture of a DUAL_POINT action, the
source of a typed text), then the choices of the `Head` that option belongs to (which element
to tap, which span of the instruction to type...). The log-prob of an action is that of its
type plus that of every path that gives it (`devicerl.agents.small.parts`).

A `Head` is one way to produce actions of one type, through one or more router options. It
owns its layers (registered on the network under the names its weights have in saved agents:
`Part.attach`), its distribution over its own choices (`forward`), how it draws them (`sample`),
the action a drawn choice makes (`action`), and what teacher forcing needs: the paths that give
an action (`paths`, `nearest`) and the log-prob of each (`extend`). A new head is a subclass in
a file of its own plus one line in `devicerl.agents.small.registry`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import torch
from torch import nn

from devicerl.actions import Action, ActionType
from devicerl.agents.capabilities import ActionKind
from devicerl.agents.small.config import FeatureConfig, SmallAgentConfig
from devicerl.agents.small.encoder import Encoded
from devicerl.agents.small.featurize import FeatureBatch, ObsMeta

#: Logit given to impossible choices (finite, so log-softmax and gradients stay finite).
MASKED = -1e9
#: The logit a choice that a grown agent adds starts at, below one it had (`Head.quiet`).
QUIET_LOGIT = -4.0
#: An exploration floor: one level for the batch, or one per observation ([B, 1] tensor).
Epsilon = float | torch.Tensor
L = TypeVar("L", bound=nn.Module)


class Part:
    """A part of the action that has layers: it registers them on the network."""

    def __init__(self) -> None:
        #: The names its layers are registered under (`attach`).
        self.layers: list[str] = []

    def attach(self, host: nn.Module, name: str, layer: L) -> L:
        """Register ``layer`` on the network ``host`` as ``name``: the prefix of its weights'
        names in saved agents (never rename one: saved agents would no longer load)."""
        if hasattr(host, name):
            raise ValueError(f"two parts of the small agent name a layer {name!r}")
        setattr(host, name, layer)
        self.layers.append(name)
        return layer

    def is_fresh(self, fresh: set[str]) -> bool:
        """Whether its layers are among the ``fresh`` weights of a grown agent (it has some)."""
        return any(k.split(".")[0] in self.layers for k in fresh)


def with_floor(log_p: torch.Tensor, logits: torch.Tensor, eps: Epsilon) -> torch.Tensor:
    """log((1 - eps) p + eps u), u uniform over the options that are not masked (``eps``: one
    level, or one per row as a [B, 1] tensor)."""
    if isinstance(eps, float | int) and eps <= 0:
        return log_p
    valid = logits > MASKED / 2
    uniform = valid / valid.sum(-1, keepdim=True).clamp(min=1)
    mixed = (1 - eps) * log_p.exp() + eps * uniform
    return torch.where(valid, mixed.clamp(min=1e-30).log(), log_p)


def entropy_of(log_p: torch.Tensor) -> torch.Tensor:
    """Entropy over the last dimension (impossible options count zero)."""
    p = log_p.exp()
    return -(p * torch.where(p > 0, log_p, torch.zeros_like(log_p))).sum(-1)


@dataclass
class Inputs:
    """What every part reads in one forward pass over a batch."""

    enc: Encoded
    batch: FeatureBatch
    temperature: float
    epsilon: Epsilon

    @property
    def metas(self) -> list[ObsMeta]:
        return self.batch.meta

    def log_softmax(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(logits / self.temperature, -1)


@dataclass
class Draw:
    """How choices are drawn: the arg-max (greedy) or a sample from ``generator``."""

    greedy: bool
    generator: torch.Generator

    def pick(self, log_p: torch.Tensor) -> torch.Tensor:
        """One option per row of [B, K] log-probs."""
        if self.greedy:
            return log_p.argmax(-1)
        probs = log_p.exp().float().cpu()
        return torch.multinomial(probs, 1, generator=self.generator).squeeze(-1)


@dataclass
class Target:
    """A path through one option of a head that gives an action (heads subclass it with the
    choices of that path)."""

    option: str


@dataclass
class Found:
    """A head's reading of an action: its paths, whether they give the action exactly, and a
    note saying how it was approximated otherwise."""

    paths: list[Any] = field(default_factory=list)
    exact: bool = True
    note: str = ""


class Chosen(ABC):
    """The choices drawn so far for a batch (`Head.sample` reads which rows took it)."""

    @abstractmethod
    def rows(self, head: Head, option: str) -> list[int]:
        """The rows whose drawn path goes through ``option`` of ``head``."""


class Head(Part, ABC):
    """One way to produce actions of `action_type` (see the module doc)."""

    #: Its name in ``agent.small.heads`` (or its own, for the heads every agent has).
    name: ClassVar[str]
    action_type: ClassVar[ActionType]
    #: Its options in its type's router, in order (e.g. a tap at a point, a drag).
    options: ClassVar[tuple[str, ...]]
    #: The kinds of action it can produce (the reach report's "agent has it").
    kinds: ClassVar[frozenset[ActionKind]] = frozenset()
    #: One of the agent's first heads (element taps, fixed swipes, instruction spans). While a
    #: type has only plain heads, an action of it is scored along its one path and its router
    #: has no exploration floor, as agents saved before the other heads existed were; any
    #: other head makes the type sum over every path that gives the action, with the floor.
    plain: ClassVar[bool] = False
    #: It points at grid cells: the encoder adds them as tokens.
    uses_cells: ClassVar[bool] = False

    def __init__(self, cfg: SmallAgentConfig) -> None:
        super().__init__()
        self.cfg = cfg

    @classmethod
    def features(cls, features: FeatureConfig) -> FeatureConfig:
        """The featurisation it needs (e.g. the words of each element's text)."""
        return features

    def expresses(self) -> frozenset[ActionKind]:
        """The kinds of action it can produce in this agent."""
        return self.kinds

    def build(self, host: nn.Module) -> None:
        """Create its layers on ``host`` (`Part.attach`), in a fixed order: weights are drawn from
        the agent's seed in the order the parts build them."""

    def option_logits(self, g: torch.Tensor) -> torch.Tensor | None:
        """[B, len(options)] router logits of its options from the global state, when its own
        layer gives them; None when its router's first layer does (the first heads')."""
        return None

    @abstractmethod
    def available(self, x: Inputs) -> torch.Tensor:
        """[B, len(options)] bool: which of its options each row can take (no element to tap,
        no word to type from...)."""

    @abstractmethod
    def forward(self, x: Inputs) -> Any:
        """Its distribution on a batch (its own record: log-probs at ``x.temperature``, with
        ``x.epsilon`` where it has the floor)."""

    def entropy(self, dist: Any) -> torch.Tensor | None:
        """[B] entropy of the choices the exploration floor covers (None: none)."""
        return None

    def sample_early(self, x: Inputs, dist: Any, draw: Draw) -> Any:
        """Choices drawn before the action type (handed to `sample` as ``early``). Only the
        instruction span's start is: the order the agent has always drawn in, kept so that a
        seeded agent samples the same actions."""
        return None

    @abstractmethod
    def sample(self, x: Inputs, dist: Any, chosen: Chosen, draw: Draw, early: Any) -> Any:
        """Draw its choices for the batch (its own record, handed back to `action`). Draws
        happen in the parts' order, so a head that draws only on the rows that took it reads
        them from ``chosen`` (its router draws before it)."""

    @abstractmethod
    def action(self, meta: ObsMeta, option: str, drawn: Any, b: int) -> tuple[Action, dict]:
        """The action row ``b`` makes through ``option`` with the ``drawn`` choices, and what
        to add to the sample's extras."""

    @abstractmethod
    def paths(self, meta: ObsMeta, action: Action) -> list[Any]:
        """Its paths (`Target` subclasses) that give ``action`` exactly."""

    def nearest(self, meta: ObsMeta, action: Action) -> Found | None:
        """Its best reading of an action it may not give exactly (None: it does not try). A
        plain head answers for every action it claims (exact when it can)."""
        return None

    def prepare(self, x: Inputs, dist: Any, wanted: Sequence[tuple[int, Any]]) -> Any:
        """Batched work `extend` needs for the (row, target) pairs about to be scored."""
        return None

    @abstractmethod
    def extend(
        self, dist: Any, ready: Any, b: int, target: Any, prior: torch.Tensor
    ) -> torch.Tensor | None:
        """``prior`` (the log-prob of the path up to its option) plus the log-prob of
        ``target``'s choices on row ``b``, summed over them; None when there are none."""

    def quiet(self, fresh: set[str], router_layer: nn.Linear | None) -> None:
        """After a saved agent without this head was loaded (``fresh``: the weights it lacked),
        make its new choices start below the ones the agent had (`QUIET_LOGIT`; ``router_layer``:
        the first layer of its type's router, when it has one)."""
