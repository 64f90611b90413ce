"""The small agent's optional action paths: choosing them, and every path that gives an action.

With ``point_actions`` a DUAL_POINT action may come from a tap on an element's centre, a fixed
swipe, a tap at a chosen point or a drag between two chosen points; with ``page_text`` /
``free_text`` typed text may come from an instruction span, a page-text span or the character
decoder. `dual_point_target` and `type_target` list every path that gives exactly the action,
and `score_alternatives` sums their probabilities, so the log-prob of an action is the same
whichever path produced it (and the same at acting and in `SmallAgent.log_prob`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from devicerl.actions import Action, ActionType
from devicerl.agents.small.featurize import ObsMeta, tap_point
from devicerl.agents.small.net import DRAG, MASKED, POINT, Encoded, HeadLogits, SmallPolicyNet
from devicerl.agents.small.point import PointChoice, anchor_points, point_choices
from devicerl.agents.small.text import CharSource, can_write, page_span_text, page_spans

_POINT_TOL = 1e-6
#: An exploration floor: one level for the batch, or one per observation ([B, 1] tensor).
Epsilon = float | torch.Tensor


class HeadLogProbs(NamedTuple):
    type: torch.Tensor
    gesture: torch.Tensor
    element: torch.Tensor
    span: torch.Tensor  # [B, Li(start), Li(end)]: log p(start) + log p(end | start)
    enc: Encoded | None = None
    point: torch.Tensor | None = None  # [B, anchors, offsets^2]: log p(anchor) + log p(offset)
    source: torch.Tensor | None = None  # [B, 3]
    page: torch.Tensor | None = None  # [B, Le, W, W]: log p(element, start, end)
    epsilon: Epsilon = 0.0


def with_floor(log_p: torch.Tensor, logits: torch.Tensor, eps: Epsilon) -> torch.Tensor:
    """log((1 - eps) p + eps u), u uniform over the options that are not masked (``eps``: one
    level, or one per row as a [B, 1] tensor)."""
    if isinstance(eps, float | int) and eps <= 0:
        return log_p
    valid = logits > MASKED / 2
    uniform = valid / valid.sum(-1, keepdim=True).clamp(min=1)
    mixed = (1 - eps) * log_p.exp() + eps * uniform
    return torch.where(valid, mixed.clamp(min=1e-30).log(), log_p)


def head_log_probs(logits: HeadLogits, temperature: float, epsilon: Epsilon = 0.0) -> HeadLogProbs:
    """Log-probs of every head at ``temperature``; the floor (``epsilon`` of a uniform choice)
    covers the action type, the element and, when on, the gesture, the point anchor and the
    text source."""
    t = float(temperature)

    def lsm(x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(x / t, -1)

    gesture = lsm(logits.gesture)
    point = source = page = None
    if logits.touch is not None:
        gesture = with_floor(gesture, logits.gesture, epsilon)
        anchors, offsets = logits.touch
        point = with_floor(lsm(anchors), anchors, epsilon).unsqueeze(-1) + lsm(offsets)
    if logits.source is not None:
        source = with_floor(lsm(logits.source), logits.source, epsilon)
    if logits.page is not None:
        elem, start, end = logits.page
        page = lsm(elem)[..., None, None] + lsm(start)[..., None] + lsm(end)
    span = lsm(logits.start).unsqueeze(-1) + lsm(logits.end)
    return HeadLogProbs(
        with_floor(lsm(logits.type), logits.type, epsilon),
        gesture,
        with_floor(lsm(logits.element), logits.element, epsilon),
        span,
        logits.enc,
        point,
        source,
        page,
        epsilon,
    )


def lift_log_probs(
    net: SmallPolicyNet, lp: HeadLogProbs, rows: list[int], touch_xy: torch.Tensor, t: float
) -> torch.Tensor:
    """[N, anchors, offsets^2] log-probs of a drag's lift point for batch rows ``rows``."""
    assert lp.enc is not None
    enc = Encoded(*(None if f is None else f[rows] for f in lp.enc))
    anchors, offsets = net.lift(enc, touch_xy)
    eps = lp.epsilon[rows] if isinstance(lp.epsilon, torch.Tensor) else lp.epsilon
    lsm = F.log_softmax
    return with_floor(lsm(anchors / t, -1), anchors, eps).unsqueeze(-1) + lsm(offsets / t, -1)


@dataclass
class Alternatives:
    """Every path that gives one action (empty lists: no such path)."""

    elements: list[int] = field(default_factory=list)  # tap on an element's centre
    swipe: int | None = None  # a fixed swipe (gesture index)
    points: list[PointChoice] = field(default_factory=list)  # a tap at a chosen point
    drag_touch: list[PointChoice] = field(default_factory=list)
    drag_lift: list[PointChoice] = field(default_factory=list)
    touch_xy: tuple[float, float] | None = None
    spans: list[tuple[int, int]] = field(default_factory=list)  # instruction spans
    page: list[tuple[int, int, int]] = field(default_factory=list)  # (element, start, end)
    free: str | None = None  # text the character decoder writes


def points_of(meta: ObsMeta, net: SmallPolicyNet) -> np.ndarray:
    return anchor_points(meta, net.cfg.grid, net.cfg.offsets)


def dual_point_target(
    meta: ObsMeta, net: SmallPolicyNet, action: Action, swipe_actions: dict[int, Action]
) -> tuple[Alternatives, bool, str]:
    """The paths that give a DUAL_POINT action (exact), else the nearest point paths."""
    assert action.touch is not None and action.lift is not None
    alt = Alternatives(touch_xy=action.touch)
    tap = action.touch == action.lift
    if tap:
        alt.elements = [
            i
            for i, e in enumerate(meta.elements)
            if max(abs(a - b) for a, b in zip(tap_point(e, meta.screen_size), action.touch))
            <= _POINT_TOL
        ]
    for g, swipe in swipe_actions.items():
        if action == swipe:
            alt.swipe = g
    pts = points_of(meta, net)
    touch, t_exact = point_choices(pts, *action.touch)
    lift, l_exact = point_choices(pts, *action.lift)
    if tap and t_exact:
        alt.points = touch
    if t_exact and l_exact:
        alt.drag_touch, alt.drag_lift = touch, lift
    if alt.elements or alt.swipe is not None or alt.points or alt.drag_touch:
        return alt, True, ""
    if tap:  # another agent's point: the nearest of ours
        alt.points = touch
    else:
        alt.drag_touch, alt.drag_lift = touch, lift
    return alt, False, "nearest point"


def type_target(
    meta: ObsMeta, cfg: Any, text: str, spans: list[tuple[int, int]], spans_exact: bool
) -> tuple[Alternatives, bool, str]:
    """The paths that give typed ``text``: exact instruction spans, page-text spans, the
    decoder; else (inexact) the closest instruction spans."""
    alt = Alternatives()
    if spans_exact:
        alt.spans = spans
    if cfg.page_text:
        alt.page = page_spans(meta, text, cfg.max_span)
    if cfg.free_text and can_write(text, meta.instruction, cfg.max_chars):
        alt.free = text
    if alt.spans or alt.page or alt.free is not None:
        return alt, True, ""
    alt.spans = spans
    return alt, False, "typed text"


def flat_index(paths: Sequence[PointChoice], k2: int) -> list[int]:
    return [a * k2 + o for a, o in paths]


class Extras:
    """Batched parts of the optional paths computed once per `_score` call."""

    def __init__(self, net: SmallPolicyNet, lp: HeadLogProbs, metas: Sequence[ObsMeta]) -> None:
        self.net, self.lp, self.metas = net, lp, metas
        self.lift: dict[int, torch.Tensor] = {}
        self.free: dict[int, torch.Tensor] = {}

    def prepare(self, targets: Sequence[Any], temperature: float) -> None:
        drags = [
            (b, t.alternatives.touch_xy)
            for b, t in enumerate(targets)
            if t.alternatives is not None and t.alternatives.drag_touch
        ]
        if drags:
            rows = [b for b, _ in drags]
            xy = torch.tensor([p for _, p in drags], device=self.lp.type.device)
            lift = lift_log_probs(self.net, self.lp, rows, xy, temperature)
            self.lift = {b: lift[i] for i, b in enumerate(rows)}
        frees = [
            (b, t.alternatives.free)
            for b, t in enumerate(targets)
            if t.alternatives is not None and t.alternatives.free is not None
        ]
        if frees:
            assert self.net.chars is not None and self.lp.enc is not None
            src = CharSource(self.metas, self.lp.type.device)
            mem = self.net.chars.memory(self.lp.enc.instr, src)
            rows = [b for b, _ in frees]
            out = self.net.chars.log_prob(
                self.lp.enc.global_state, mem, src, rows, [t for _, t in frees], temperature
            )
            self.free = {b: out[i] for i, b in enumerate(rows)}


def score_alternatives(
    lp: HeadLogProbs, b: int, alt: Alternatives, kind: ActionType, extras: Extras
) -> torch.Tensor | None:
    """log p(action | type) summed over its paths (None when there is none)."""
    terms: list[torch.Tensor] = []
    if kind is ActionType.DUAL_POINT:
        if alt.elements:
            terms.append(lp.gesture[b, 0] + lp.element[b, alt.elements].logsumexp(0))
        if alt.swipe is not None:
            terms.append(lp.gesture[b, alt.swipe])
        if lp.point is not None:
            flat = lp.point[b].flatten()
            k2 = lp.point.shape[-1]
            if alt.points:
                terms.append(lp.gesture[b, POINT] + flat[flat_index(alt.points, k2)].logsumexp(0))
            if alt.drag_touch:
                lift = extras.lift[b].flatten()
                terms.append(
                    lp.gesture[b, DRAG]
                    + flat[flat_index(alt.drag_touch, k2)].logsumexp(0)
                    + lift[flat_index(alt.drag_lift, k2)].logsumexp(0)
                )
    else:
        src = lp.source
        if alt.spans:
            starts, ends = zip(*alt.spans)
            s = lp.span[b, list(starts), list(ends)].logsumexp(0)
            terms.append(s if src is None else src[b, 0] + s)
        if alt.page and src is not None and lp.page is not None:
            e, s, t = (list(v) for v in zip(*alt.page))
            terms.append(src[b, 1] + lp.page[b, e, s, t].logsumexp(0))
        if alt.free is not None and src is not None:
            terms.append(src[b, 2] + extras.free[b])
    if not terms:
        return None
    return torch.stack(terms).logsumexp(0)


def build_point_action(meta: ObsMeta, net: SmallPolicyNet, more: dict[str, Any]) -> Action:
    pts = points_of(meta, net)
    a, o = more["touch"]
    x, y = (float(v) for v in pts[a, o])
    if more.get("lift") is None:
        return Action.tap(x, y)
    a2, o2 = more["lift"]
    return Action.swipe(x, y, *(float(v) for v in pts[a2, o2]))


def build_text(meta: ObsMeta, more: dict[str, Any]) -> str:
    if more["source"] == 1:
        return page_span_text(meta, *more["page"])
    return more["free"]
