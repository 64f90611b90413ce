"""Points anywhere on the screen (``agent.small.heads: [points]``): taps at a point and drags.

A point is chosen in two parts: an anchor, either a UI element's box or a cell of a coarse
grid over the screen, then one of ``K x K`` offsets inside the anchor (the centres of a K x K
split of its box). Element anchors make "the left end of the slider" easy to say, grid anchors
reach points no element covers (a canvas, an empty spot). A drag chooses its touch point that
way, then its lift point with pointers conditioned on where the touch landed. The exploration
floor covers the anchor (and, with this head, the gesture).

Every (anchor, offset) pair maps to one normalised point (`anchor_points`); an action's point is
scored by summing over every pair that gives exactly that point, so the log-prob of a point does
not depend on which pair produced it. Another agent's point between ours is read as the nearest
of ours (flagged inexact).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from devicerl.actions import Action, ActionType
from devicerl.agents.capabilities import ActionKind
from devicerl.agents.small.encoder import Encoded
from devicerl.agents.small.featurize import ObsMeta
from devicerl.agents.small.heads.base import (
    MASKED,
    QUIET_LOGIT,
    Epsilon,
    Found,
    Head,
    Inputs,
    Target,
    entropy_of,
    with_floor,
)

#: Two points within this distance (normalised) are the same point.
POINT_TOL = 1e-6
#: Frequencies of the Fourier features that tell the lift pointers where the touch landed.
_FREQS = (1.0, 2.0, 4.0, 8.0, 16.0)

PointChoice = tuple[int, int]  # (anchor index: grid cells first, then elements; offset index)


def anchor_boxes(meta: ObsMeta, grid: tuple[int, int]) -> np.ndarray:
    """Normalised boxes of the anchors: the grid cells (row by row), then the kept elements (a
    fixed number of cells first, so an anchor's index is the same in a padded batch)."""
    w, h = meta.screen_size
    els = [(e.bbox[0] / w, e.bbox[1] / h, e.bbox[2] / w, e.bbox[3] / h) for e in meta.elements]
    cols, rows = grid
    cells = [
        (c / cols, r / rows, (c + 1) / cols, (r + 1) / rows)
        for r in range(rows)
        for c in range(cols)
    ]
    return np.asarray(cells + els, np.float64).reshape(-1, 4)


def anchor_points(meta: ObsMeta, grid: tuple[int, int], k: int) -> np.ndarray:
    """[anchors, k * k, 2]: the point of each (anchor, offset), clipped to the screen. Offset
    ``i * k + j`` is row ``i``, column ``j`` of the anchor's k x k split."""
    boxes = anchor_boxes(meta, grid)
    frac = (np.arange(k) + 0.5) / k
    fx = np.tile(frac, k)  # column j
    fy = np.repeat(frac, k)  # row i
    x = boxes[:, None, 0] + fx[None] * (boxes[:, None, 2] - boxes[:, None, 0])
    y = boxes[:, None, 1] + fy[None] * (boxes[:, None, 3] - boxes[:, None, 1])
    return np.clip(np.stack([x, y], -1), 0.0, 1.0)


def point_choices(points: np.ndarray, x: float, y: float) -> tuple[list[PointChoice], bool]:
    """The (anchor, offset) pairs that give the point (x, y) exactly; else the nearest pair
    (flagged inexact: e.g. a tap recorded by another agent)."""
    d = np.maximum(np.abs(points[..., 0] - x), np.abs(points[..., 1] - y))
    hit = np.argwhere(d <= POINT_TOL)
    if len(hit):
        return [(int(a), int(o)) for a, o in hit], True
    a, o = np.unravel_index(int(d.argmin()), d.shape)
    return [(int(a), int(o))], False


def fourier(xy: torch.Tensor) -> torch.Tensor:
    """[N, 2] points -> [N, 4 * len(_FREQS)] sin/cos features."""
    f = torch.tensor(_FREQS, device=xy.device, dtype=xy.dtype) * math.pi
    ang = xy.unsqueeze(-1) * f  # [N, 2, F]
    return torch.cat([ang.sin(), ang.cos()], -1).flatten(1)


class PointerPair(nn.Module):
    """Anchor and offset logits for one point, from a query vector."""

    def __init__(self, d: int, k: int) -> None:
        super().__init__()
        self.query, self.key, self.score = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, 1)
        self.offset_query = nn.Linear(d, d)
        self.offset = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, k * k))

    def forward(self, q: torch.Tensor, anchors: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """q [N, d], anchors [N, A, d] -> anchor logits [N, A], offset logits [N, A, k * k]."""
        scale = 1.0 / math.sqrt(q.shape[-1])
        logits = torch.einsum("nd,nad->na", self.query(q), self.key(anchors)) * scale
        logits = logits + self.score(anchors).squeeze(-1)
        offsets = self.offset(anchors + self.offset_query(q).unsqueeze(1))
        return logits, offsets


class PointHeads(nn.Module):
    """The touch pointers (from the global state) and the lift pointers (from the global state
    and the touch point)."""

    def __init__(self, d: int, k: int) -> None:
        super().__init__()
        self.touch = PointerPair(d, k)
        self.lift = PointerPair(d, k)
        self.touch_embed = nn.Sequential(nn.Linear(4 * len(_FREQS), d), nn.GELU(), nn.Linear(d, d))

    def lift_logits(
        self, g: torch.Tensor, anchors: torch.Tensor, touch_xy: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.lift(g + self.touch_embed(fourier(touch_xy)), anchors)


@dataclass
class PointTarget(Target):
    touch: list[PointChoice]  #: (anchor, offset) pairs at the tap's point (summed over)


@dataclass
class DragTarget(Target):
    touch: list[PointChoice]
    lift: list[PointChoice]
    touch_xy: tuple[float, float]  #: where the touch lands (the lift pointers read it)


@dataclass
class PointDraw:
    touch: list[PointChoice]
    lift: dict[int, PointChoice]  #: the drags' lift points, by row


def _flat(paths: Sequence[PointChoice], k2: int) -> list[int]:
    return [a * k2 + o for a, o in paths]


class Points(Head):
    """Taps at any point and drags from any point to any point (see the module doc)."""

    name = "points"
    action_type = ActionType.DUAL_POINT
    options = ("point", "drag")
    kinds = frozenset({ActionKind.POINT, ActionKind.DRAG, ActionKind.SCROLL})  # a drag scrolls
    uses_cells = True

    def build(self, host: nn.Module) -> None:
        d = self.cfg.d_model
        self.gestures = self.attach(host, "more_gestures", nn.Linear(d, len(self.options)))
        self.pointers = self.attach(host, "points", PointHeads(d, self.cfg.offsets))

    def option_logits(self, g: torch.Tensor) -> torch.Tensor:
        return self.gestures(g)

    def anchor_points(self, meta: ObsMeta) -> np.ndarray:
        """[anchors, offsets^2, 2]: the point of each (anchor, offset) on this screen."""
        return anchor_points(meta, self.cfg.grid, self.cfg.offsets)

    @staticmethod
    def anchors(enc: Encoded) -> tuple[torch.Tensor, torch.Tensor]:
        """Point anchors (grid cells, then elements) and their mask."""
        assert enc.cells is not None
        mask = torch.cat([enc.elem_mask.new_ones(enc.cells.shape[:2]), enc.elem_mask], 1)
        return torch.cat([enc.cells, enc.elems], 1), mask

    def available(self, x: Inputs) -> torch.Tensor:
        mask = x.enc.elem_mask
        return mask.new_ones(mask.shape[0], len(self.options))

    def forward(self, x: Inputs) -> torch.Tensor:
        """[B, anchors, offsets^2] log-probs of the touch point: log p(anchor) (with the
        floor) + log p(offset | anchor)."""
        anchors, mask = self.anchors(x.enc)
        logits, offsets = self.pointers.touch(x.enc.global_state, anchors)
        logits = logits.masked_fill(~mask, MASKED)
        log_p = with_floor(x.log_softmax(logits), logits, x.epsilon).unsqueeze(-1)
        return log_p + x.log_softmax(offsets)

    def lift(self, x: Inputs, rows: list[int], touch_xy: torch.Tensor) -> torch.Tensor:
        """[N, anchors, offsets^2] log-probs of a drag's lift point for batch rows ``rows``,
        given where their touch landed."""
        enc = Encoded(*(None if f is None else f[rows] for f in x.enc))
        anchors, mask = self.anchors(enc)
        logits, offsets = self.pointers.lift_logits(enc.global_state, anchors, touch_xy)
        logits = logits.masked_fill(~mask, MASKED)
        eps: Epsilon = x.epsilon[rows] if isinstance(x.epsilon, torch.Tensor) else x.epsilon
        return with_floor(x.log_softmax(logits), logits, eps).unsqueeze(-1) + x.log_softmax(offsets)

    def entropy(self, dist: torch.Tensor) -> torch.Tensor:
        return entropy_of(dist.flatten(1))

    def sample(self, x: Inputs, dist: torch.Tensor, chosen, draw, early) -> PointDraw:
        k2 = dist.shape[-1]
        touch = [divmod(int(f), k2) for f in draw.pick(dist.flatten(1)).tolist()]
        drags = chosen.rows(self, "drag")
        lift: dict[int, PointChoice] = {}
        if drags:
            xy = [self.anchor_points(x.metas[b])[touch[b]] for b in drags]
            at = torch.from_numpy(np.asarray(xy, np.float32)).to(dist.device)
            picks = draw.pick(self.lift(x, drags, at).flatten(1)).tolist()
            lift = {b: divmod(int(f), k2) for b, f in zip(drags, picks)}
        return PointDraw(touch, lift)

    def action(self, meta: ObsMeta, option: str, drawn: PointDraw, b: int) -> tuple[Action, dict]:
        pts = self.anchor_points(meta)
        x, y = (float(v) for v in pts[drawn.touch[b]])
        if option == "point":
            return Action.tap(x, y), {}
        return Action.swipe(x, y, *(float(v) for v in pts[drawn.lift[b]])), {}

    def _choices(self, meta: ObsMeta, action: Action):
        assert action.touch is not None and action.lift is not None
        pts = self.anchor_points(meta)
        return (*point_choices(pts, *action.touch), *point_choices(pts, *action.lift))

    def paths(self, meta: ObsMeta, action: Action) -> list[Target]:
        if action.type is not ActionType.DUAL_POINT:
            return []
        touch, t_exact, lift, l_exact = self._choices(meta, action)
        out: list[Target] = []
        if action.touch == action.lift and t_exact:
            out.append(PointTarget("point", touch))
        if t_exact and l_exact:
            out.append(DragTarget("drag", touch, lift, action.touch))  # type: ignore[arg-type]
        return out

    def nearest(self, meta: ObsMeta, action: Action) -> Found | None:
        if action.type is not ActionType.DUAL_POINT:
            return None
        touch, _, lift, _ = self._choices(meta, action)
        if action.touch == action.lift:
            return Found([PointTarget("point", touch)], False, "nearest point")
        xy = action.touch
        return Found([DragTarget("drag", touch, lift, xy)], False, "nearest point")  # type: ignore[arg-type]

    def prepare(self, x: Inputs, dist: torch.Tensor, wanted) -> dict[int, torch.Tensor]:
        """The lift log-probs of the rows with a drag to score."""
        drags = [(b, t.touch_xy) for b, t in wanted if isinstance(t, DragTarget)]
        if not drags:
            return {}
        rows = [b for b, _ in drags]
        xy = torch.tensor([p for _, p in drags], device=dist.device)
        lift = self.lift(x, rows, xy)
        return {b: lift[i] for i, b in enumerate(rows)}

    def extend(self, dist: torch.Tensor, ready: dict[int, torch.Tensor], b: int, target, prior):
        flat = dist[b].flatten()
        k2 = dist.shape[-1]
        s = prior + flat[_flat(target.touch, k2)].logsumexp(0)
        if isinstance(target, DragTarget):
            s = s + ready[b].flatten()[_flat(target.lift, k2)].logsumexp(0)
        return s

    @torch.no_grad()
    def quiet(self, fresh: set[str], router_layer: nn.Linear | None) -> None:
        """Fresh point and drag options start as the element tap, `QUIET_LOGIT` lower."""
        if router_layer is None or not self.is_fresh(fresh):
            return
        tap = router_layer
        self.gestures.weight.copy_(tap.weight[:1].expand(len(self.options), -1))
        self.gestures.bias.copy_(tap.bias[:1] + QUIET_LOGIT)
