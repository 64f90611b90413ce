"""The action type: the first choice of every action, over the type head's classes.

The classes are part of the agent's saved config (``type_classes``, AitW's seven by default), so
an agent keeps exactly the outputs it was saved with when `ActionType` grows; ``allowed_types``
masks some of them, and a type whose heads can take no option on a screen (no element to tap,
no instruction to type from) is masked there.
"""

from __future__ import annotations

import torch
from torch import nn

from devicerl.actions import ActionType
from devicerl.agents.small.config import SmallAgentConfig
from devicerl.agents.small.heads.base import (
    MASKED,
    QUIET_LOGIT,
    Draw,
    Inputs,
    Part,
    entropy_of,
    with_floor,
)


class TypeHead(Part):
    """An MLP over the global state, one output per class (see the module doc)."""

    def __init__(self, cfg: SmallAgentConfig) -> None:
        super().__init__()
        self.classes = tuple(ActionType(t) for t in cfg.type_classes)
        allowed = cfg.allowed_types
        self.allowed = torch.tensor([allowed is None or t.value in allowed for t in self.classes])
        self.mlp: nn.Sequential | None = None

    def index(self, action_type: ActionType) -> int | None:
        """Its output for ``action_type`` (None: not one of its classes)."""
        return self.classes.index(action_type) if action_type in self.classes else None

    def build(self, host: nn.Module, d: int) -> None:
        mlp = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, len(self.classes)))
        self.mlp = self.attach(host, "type_head", mlp)

    def forward(self, x: Inputs, reachable: dict[ActionType, torch.Tensor]) -> torch.Tensor:
        """[B, classes] log-probs; ``reachable``: per type with heads, [B] whether any of its
        options is available."""
        assert self.mlp is not None
        g = x.enc.global_state
        ok = self.allowed.to(g.device).expand(g.shape[0], -1).clone()
        for t, reach in reachable.items():
            ok[:, self.classes.index(t)] &= reach
        logits = self.mlp(g).masked_fill(~ok, MASKED)
        return with_floor(x.log_softmax(logits), logits, x.epsilon)

    def sample(self, log_p: torch.Tensor, draw: Draw) -> list[ActionType]:
        return [self.classes[int(i)] for i in draw.pick(log_p).tolist()]

    def entropy(self, log_p: torch.Tensor) -> torch.Tensor:
        return entropy_of(log_p)

    @torch.no_grad()
    def quiet(self, new_types: set[ActionType], old_types: set[ActionType]) -> None:
        """Types allowed now but not in the saved agent start `QUIET_LOGIT` below its first."""
        assert self.mlp is not None
        out = self.mlp[-1]
        assert isinstance(out, nn.Linear)
        if new_types and old_types:
            ref = min(self.classes.index(t) for t in old_types)
            for t in new_types:
                out.weight[self.classes.index(t)] = out.weight[ref]
                out.bias[self.classes.index(t)] = out.bias[ref] + QUIET_LOGIT
