"""Four fixed swipes from the screen centre (``agent.small.heads: [swipes]``): up, down, left,
right, each `SWIPE_LENGTH` long. They are options of the gesture choice and need no other.

Every agent has them, listed or not (`devicerl.agents.small.registry`): unlisted, their options
stay masked, and a swipe is scored at its direction's masked option (as good as impossible),
as agents without them always scored one.
"""

from __future__ import annotations

import torch

from devicerl.actions import Action, ActionType
from devicerl.agents.capabilities import ActionKind
from devicerl.agents.small.featurize import ObsMeta
from devicerl.agents.small.heads.base import Found, Head, Inputs, Target

#: Swipes run from the screen centre, this far (normalised) in their direction.
SWIPE_LENGTH = 0.3
_VECTORS = {"up": (0.0, -1.0), "down": (0.0, 1.0), "left": (-1.0, 0.0), "right": (1.0, 0.0)}


def swipe_action(direction: str) -> Action:
    """The agent's swipe in ``direction`` (up, down, left, right)."""
    dx, dy = _VECTORS[direction]
    h = SWIPE_LENGTH / 2
    return Action.swipe(0.5 - dx * h, 0.5 - dy * h, 0.5 + dx * h, 0.5 + dy * h)


class Swipes(Head):
    """The four fixed swipes (see the module doc)."""

    name = "swipes"
    action_type = ActionType.DUAL_POINT
    options = tuple(_VECTORS)
    kinds = frozenset({ActionKind.SCROLL})
    plain = True

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.on = self.name in cfg.heads

    def expresses(self) -> frozenset[ActionKind]:
        return self.kinds if self.on else frozenset()

    def available(self, x: Inputs) -> torch.Tensor:
        rows = x.enc.global_state.shape[0]
        return torch.full((rows, len(self.options)), self.on, device=x.enc.global_state.device)

    def forward(self, x: Inputs) -> None:
        return None  # a swipe is its option: nothing more to choose

    def sample(self, x, dist, chosen, draw, early) -> None:
        return None

    def action(self, meta: ObsMeta, option: str, drawn, b: int) -> tuple[Action, dict]:
        return swipe_action(option), {}

    def paths(self, meta: ObsMeta, action: Action) -> list[Target]:
        found = [Target(d) for d in self.options if self.on and action == swipe_action(d)]
        return found[-1:]

    def nearest(self, meta: ObsMeta, action: Action) -> Found | None:
        """A swipe's direction (exact only for the agent's own geometry)."""
        if not action.is_swipe:
            return None
        direction = action.swipe_direction or "up"
        return Found([Target(direction)], action == swipe_action(direction), "swipe")

    def extend(self, dist, ready, b: int, target: Target, prior: torch.Tensor) -> torch.Tensor:
        return prior
