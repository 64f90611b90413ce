"""A small CNN that turns the screenshot into per-element and per-cell features.

Colour, shape and position are what a screen shows and a DOM often does not say (MiniWoB++
click-color, identify-shape, a canvas to click on): the feature map (stride
`config.PIXEL_STRIDE`) is averaged over each element's box (the featurizer's pooling weights)
and over each cell of the agent's coarse screen grid, and added to those tokens. The pooled
mean colour goes in unchanged beside the learnt channels, so colour is available from the
first update.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from devicerl.agents.small.config import PIXEL_STRIDE


class PixelCNN(nn.Module):
    """Three convolutions (stride ``PIXEL_STRIDE`` in all) to ``channels`` feature maps, plus
    the input's colour averaged to the same grid (3 more channels)."""

    def __init__(self, channels: int = 32) -> None:
        super().__init__()
        self.out_channels = channels + 3
        self.net = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1),
            nn.GELU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.GELU(),
            nn.Conv2d(32, channels, 3, padding=1),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """[B, 3, H, W] in [0, 1] -> [B, channels + 3, H / 4, W / 4]."""
        feats = self.net(images)
        colour = F.avg_pool2d(images, PIXEL_STRIDE)[..., : feats.shape[-2], : feats.shape[-1]]
        return torch.cat([feats, colour], 1)


def pool_elements(fmap: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Each element's mean feature: [B, C, h, w] and [B, Le, h * w] -> [B, Le, C]."""
    return torch.einsum("bep,bcp->bec", weights, fmap.flatten(2))


def pool_cells(fmap: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    """Each grid cell's mean feature, cells row by row: -> [B, cols * rows, C]."""
    cols, rows = grid
    return F.adaptive_avg_pool2d(fmap, (rows, cols)).flatten(2).transpose(1, 2)
