"""Points anywhere on the screen for the small agent: free taps and drags (`point_actions`).

A point is chosen in two parts: an anchor, either a UI element's box or a cell of a coarse
grid over the screen, then one of ``K x K`` offsets inside the anchor (the centres of a K x K
split of its box). Element anchors make "the left end of the slider" easy to say, grid anchors
reach points no element covers (a canvas, an empty spot). A drag chooses its touch point that
way, then its lift point with pointers conditioned on where the touch landed.

Every (anchor, offset) pair maps to one normalised point (`anchor_points`); an action's point is
scored by summing over every pair that gives exactly that point, so the log-prob of a point does
not depend on which pair produced it.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from devicerl.agents.small.featurize import ObsMeta

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
