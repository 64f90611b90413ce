"""Taps on a listed element's centre: a pointer over the screen's elements."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from devicerl.actions import Action, ActionType
from devicerl.agents.capabilities import ActionKind
from devicerl.agents.small.featurize import ObsMeta, tap_point, tapped_elements
from devicerl.agents.small.heads.base import (
    MASKED,
    Found,
    Head,
    Inputs,
    Target,
    entropy_of,
    with_floor,
)

_POINT_TOL = 1e-6


@dataclass
class ElementTarget(Target):
    elements: list[int]  #: the elements whose tap gives the action (summed over)


class Tap(Head):
    """A tap on an element's centre (every agent has it). The floor covers the element."""

    name = "tap"
    action_type = ActionType.DUAL_POINT
    options = ("tap",)
    kinds = frozenset({ActionKind.TAP, ActionKind.SELECT})  # a tap on a picker's row selects
    plain = True

    def build(self, host: nn.Module) -> None:
        d = self.cfg.d_model
        self.query = self.attach(host, "elem_query", nn.Linear(d, d))
        self.key = self.attach(host, "elem_key", nn.Linear(d, d))
        score = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, 1))
        self.score = self.attach(host, "elem_score", score)

    def available(self, x: Inputs) -> torch.Tensor:
        return x.enc.elem_mask.any(1, keepdim=True)

    def forward(self, x: Inputs) -> torch.Tensor:
        """[B, elements] log-probs, with the exploration floor."""
        g, elems = x.enc.global_state, x.enc.elems
        logits = torch.einsum("bd,bnd->bn", self.query(g), self.key(elems))
        logits = logits * (1.0 / math.sqrt(self.cfg.d_model)) + self.score(elems).squeeze(-1)
        logits = logits.masked_fill(~x.enc.elem_mask, MASKED)
        return with_floor(x.log_softmax(logits), logits, x.epsilon)

    def entropy(self, dist: torch.Tensor) -> torch.Tensor:
        return entropy_of(dist)

    def sample(self, x, dist: torch.Tensor, chosen, draw, early) -> list[int]:
        return [int(e) for e in draw.pick(dist).tolist()]

    def action(self, meta: ObsMeta, option: str, drawn: list[int], b: int) -> tuple[Action, dict]:
        if not meta.elements:
            return Action.invalid("", "small agent: no element to tap"), {}
        e = drawn[b]
        return Action.tap(*meta.tap_points[e]), {"element": meta.elements[e].id}

    def paths(self, meta: ObsMeta, action: Action) -> list[ElementTarget]:
        if action.type is not ActionType.DUAL_POINT or action.touch != action.lift:
            return []
        assert action.touch is not None
        hit = [
            i
            for i, e in enumerate(meta.elements)
            if max(abs(a - b) for a, b in zip(tap_point(e, meta.screen_size), action.touch))
            <= _POINT_TOL
        ]
        return [ElementTarget("tap", hit)] if hit else []

    def nearest(self, meta: ObsMeta, action: Action) -> Found | None:
        """A tap (or a gesture too short to be a swipe) lands on the elements whose centre it
        is; else the smallest containing it, else the nearest (flagged inexact)."""
        if action.type is not ActionType.DUAL_POINT or action.is_swipe:
            return None
        assert action.touch is not None
        hit, exact, note = tapped_elements(
            meta.elements, meta.tap_points, meta.screen_size, *action.touch
        )
        return Found([ElementTarget("tap", hit)], exact, note)

    def extend(self, dist: torch.Tensor, ready, b: int, target: ElementTarget, prior):
        if not target.elements:
            return None
        return prior + dist[b, target.elements].logsumexp(0)
