"""The choice among the heads of one action type: a router over their options.

DUAL_POINT's router is the gesture (a tap on an element, a fixed swipe, a tap at a point, a
drag); TYPE's is the source of the typed text (an instruction span, page text, the character
decoder). A router's first layer gives the options of the agent's first heads, in a fixed order
(saved agents hold it as it is); a head whose options are not among them brings its own layer
(`Head.option_logits`), appended. An option no head of the agent has stays masked.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from devicerl.actions import ActionType
from devicerl.agents.small.heads.base import (
    MASKED,
    QUIET_LOGIT,
    Draw,
    Head,
    Inputs,
    Part,
    entropy_of,
    with_floor,
)


@dataclass(frozen=True)
class RouterSpec:
    """A router's first layer (its saved name and options) and the key of the sample's extras
    that names the drawn option."""

    layer: str
    base: tuple[str, ...]
    extras_key: str
    #: Built even when its type has one option (so its draw keeps its place among the draws).
    always: bool = False


#: The routers of the types the agent's first heads produce.
ROUTERS: dict[ActionType, RouterSpec] = {
    ActionType.DUAL_POINT: RouterSpec(
        "gesture_head", ("tap", "up", "down", "left", "right"), "gesture", always=True
    ),
    ActionType.TYPE: RouterSpec("source_head", ("instruction", "page", "free"), "source"),
}


def router_spec(action_type: ActionType) -> RouterSpec:
    """The router of a type (one with no first layer for a type the first heads lack)."""
    return ROUTERS.get(action_type, RouterSpec(f"{action_type.value.lower()}_router", (), "route"))


def needs_router(spec: RouterSpec, heads: list[Head]) -> bool:
    return spec.always or sum(len(h.options) for h in heads) > 1


@dataclass
class RouterDist:
    """Log-probs [B, options] of a router's options (masked where no head can take them)."""

    log_p: torch.Tensor
    available: torch.Tensor  #: [B] some option is available


class Router(Part):
    """The choice among the options of one type's heads (see the module doc)."""

    def __init__(self, action_type: ActionType, spec: RouterSpec, heads: list[Head]) -> None:
        super().__init__()
        self.action_type, self.spec, self.heads = action_type, spec, heads
        self.extras_key = spec.extras_key
        owners = {o: h for h in heads for o in h.options}
        for h in heads:
            if 0 < sum(o in spec.base for o in h.options) < len(h.options):
                raise ValueError(f"head {h.name}: its options are partly in {spec.layer}'s")
        #: (head, option) of each output, in order; None: an option no head of the agent has
        self.outputs: list[tuple[Head | None, str]] = [(owners.get(o), o) for o in spec.base]
        self.outputs += [(h, o) for h in heads for o in h.options if o not in spec.base]
        #: The exploration floor covers the router once a head beyond the first ones joins.
        self.floored = any(not h.plain for h in heads)
        self.layer: nn.Linear | None = None

    def index(self, head: Head, option: str) -> int:
        return self.outputs.index((head, option))

    def build(self, host: nn.Module, d: int) -> None:
        if self.spec.base:
            self.layer = self.attach(host, self.spec.layer, nn.Linear(d, len(self.spec.base)))

    def forward(self, x: Inputs, available: dict[Head, torch.Tensor]) -> RouterDist:
        g = x.enc.global_state
        parts = [] if self.layer is None else [self.layer(g)]
        own = [h.option_logits(g) for h in self.heads if h.options[0] not in self.spec.base]
        logits = torch.cat(parts + [o for o in own if o is not None], -1)
        none = torch.zeros(g.shape[0], dtype=torch.bool, device=g.device)
        ok = torch.stack(
            [none if h is None else available[h][:, h.options.index(o)] for h, o in self.outputs],
            1,
        )
        logits = logits.masked_fill(~ok, MASKED)
        log_p = x.log_softmax(logits)
        if self.floored:
            log_p = with_floor(log_p, logits, x.epsilon)
        return RouterDist(log_p, ok.any(1))

    def sample(self, dist: RouterDist, draw: Draw) -> list[tuple[Head | None, str]]:
        return [self.outputs[int(i)] for i in draw.pick(dist.log_p).tolist()]

    def entropy(self, dist: RouterDist) -> torch.Tensor | None:
        return entropy_of(dist.log_p) if self.floored else None

    @torch.no_grad()
    def quiet(self, fresh: set[str]) -> None:
        """A first layer the saved agent lacked: every option starts equal, but those of heads
        the saved agent lacked too, which start `QUIET_LOGIT` lower."""
        if self.layer is None or not self.is_fresh(fresh):
            return
        nn.init.zeros_(self.layer.weight)
        base = self.outputs[: len(self.spec.base)]
        had = [h is not None and not h.is_fresh(fresh) for h, _ in base]
        self.layer.bias.copy_(torch.tensor([0.0 if k else QUIET_LOGIT for k in had]))
