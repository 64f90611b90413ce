"""The small agent's encoder: one transformer over a global token, the instruction's tokens, the
screen's elements and (optionally) grid cells and screenshot patches. Critics reuse it (a value
head on ``global_state``).

With point actions or pixels, grid cells join as tokens: shared with the others, or gated (the
others read them only through a cross-attention that starts closed; see
``SmallAgentConfig.cell_attention``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn

from devicerl.agents.small.columns import HistoryColumns
from devicerl.agents.small.config import SmallAgentConfig
from devicerl.agents.small.featurize import ROLE_BUCKETS, FeatureBatch
from devicerl.agents.small.pixels import PixelCNN, pool_cells, pool_elements

#: Offsets between instruction tokens beyond this share one attention bias (relative positions).
REL_CLIP = 8


class Encoded(NamedTuple):
    """Encoder outputs: the global state and per-token states (with their masks)."""

    global_state: torch.Tensor  # [B, d]
    instr: torch.Tensor  # [B, Li, d]
    elems: torch.Tensor  # [B, Le, d]
    instr_mask: torch.Tensor  # [B, Li]
    elem_mask: torch.Tensor  # [B, Le]
    cells: torch.Tensor | None = None  # [B, grid cells, d] (with point heads or pixels)


def cell_boxes(grid: tuple[int, int]) -> torch.Tensor:
    """Normalised (left, top, right, bottom) of each grid cell, row by row: [cols * rows, 4]."""
    cols, rows = grid
    c = torch.arange(cols * rows)
    x, y = (c % cols).float(), (c // cols).float()
    return torch.stack([x / cols, y / rows, (x + 1) / cols, (y + 1) / rows], 1)


class SmallEncoder(nn.Module):
    """Encodes a `FeatureBatch`; critics can reuse it (e.g. a value head on ``global_state``).
    ``cells``: the grid cells join as tokens (a head points at them); with pixels they always
    do. The history row's width follows the type head's classes (``cfg.type_classes``)."""

    def __init__(self, cfg: SmallAgentConfig, cells: bool = False) -> None:
        super().__init__()
        d, fc = cfg.d_model, cfg.features
        self.d_model = d
        self.pieces = nn.EmbeddingBag(fc.buckets, d, mode="mean", padding_idx=0)
        self.roles = nn.Embedding(ROLE_BUCKETS, d, padding_idx=0)
        # Token order: an embedding per index (absolute; shifted: from an offset that depends on
        # the instruction's words), or a per-head attention bias per clipped offset between two
        # instruction tokens (relative; zero at first: order-blind).
        self.relative = fc.instr_positions == "relative"
        self.shift = fc.max_instr_tokens if fc.instr_positions == "shifted" else 0
        self.n_heads = cfg.n_heads
        if self.relative:
            self.rel_bias = nn.Embedding(2 * REL_CLIP + 1, cfg.n_heads)
            nn.init.zeros_(self.rel_bias.weight)
        else:
            self.positions = nn.Embedding(fc.max_instr_tokens + self.shift, d)
        self.kinds = nn.Embedding(4, d)  # global, instruction, element, image
        self.instr_feats = nn.Linear(fc.instr_features, d)
        self.elem_feats = nn.Sequential(nn.Linear(fc.elem_features, d), nn.GELU(), nn.Linear(d, d))
        self.global_token = nn.Parameter(torch.zeros(d))
        history = HistoryColumns.of(cfg.type_classes).width
        self.history = nn.Linear(history, d) if fc.history else None
        self.patches: nn.Module | None = None
        if fc.screenshot_size is not None:
            self.patches = nn.Conv2d(3, d, kernel_size=8, stride=8)
            n = (fc.screenshot_size[0] // 8) * (fc.screenshot_size[1] // 8)
            self.patch_pos = nn.Parameter(torch.zeros(n, d))
        layer = nn.TransformerEncoderLayer(
            d, cfg.n_heads, cfg.d_ff, cfg.dropout, activation="gelu", batch_first=True,
            norm_first=True,
        )  # fmt: skip
        self.transformer = nn.TransformerEncoder(
            layer, cfg.n_layers, norm=nn.LayerNorm(d), enable_nested_tensor=False
        )
        self.in_norm = nn.LayerNorm(d)
        # Later additions, built only when on (so older configs initialise exactly as before).
        self.cnn: PixelCNN | None = None
        if fc.pixels:
            self.cnn = PixelCNN()
            self.pixel_elems = nn.Linear(self.cnn.out_channels, d)
        self.grid = cfg.grid
        self.n_cells = cfg.grid[0] * cfg.grid[1] if cells or fc.pixels else 0
        if self.n_cells:
            self.cell_pos = nn.Parameter(torch.randn(self.n_cells, d) * 0.02)
            self.cell_geom = nn.Linear(4, d)
            self.register_buffer("cell_boxes", cell_boxes(cfg.grid), persistent=False)
            if self.cnn is not None:
                self.pixel_cells = nn.Linear(self.cnn.out_channels, d)
        # gated cells: the other tokens read them after the transformer, through a
        # cross-attention whose output projection starts at zero (the gate, closed at first)
        self.cell_readback: nn.MultiheadAttention | None = None
        if self.n_cells and cfg.cell_attention == "gated":
            self.cell_readback = nn.MultiheadAttention(
                d, cfg.n_heads, dropout=cfg.dropout, batch_first=True
            )
            nn.init.zeros_(self.cell_readback.out_proj.weight)
            nn.init.zeros_(self.cell_readback.out_proj.bias)

    def bag(self, ids: torch.Tensor) -> torch.Tensor:
        """[B, N, P] word-piece ids -> [B, N, d] mean embeddings."""
        b, n, p = ids.shape
        return self.pieces(ids.reshape(b * n, p)).reshape(b, n, -1)

    def _relative_mask(self, pad: torch.Tensor, li: int) -> torch.Tensor:
        """[B * heads, L, L] additive attention mask: the offset bias between instruction tokens
        (they follow the global token), -inf on padded keys."""
        b, n = pad.shape
        idx = torch.arange(li, device=pad.device)
        offset = (idx.view(1, -1) - idx.view(-1, 1)).clamp(-REL_CLIP, REL_CLIP) + REL_CLIP
        mask = torch.zeros(b, self.n_heads, n, n, device=pad.device)
        mask[:, :, 1 : 1 + li, 1 : 1 + li] = self.rel_bias(offset).permute(2, 0, 1)
        mask = mask.masked_fill(pad[:, None, None, :], float("-inf"))
        return mask.view(b * self.n_heads, n, n)

    def forward(self, batch: FeatureBatch) -> Encoded:
        b, li = batch.instr_mask.shape
        instr = (
            self.bag(batch.instr_ids) + self.instr_feats(batch.instr_feats) + self.kinds.weight[1]
        )
        if self.shift:  # the same instruction always gets the same offset (log-probs agree)
            start = batch.instr_ids[:, :, 0].sum(1, keepdim=True) % self.shift
            instr = instr + self.positions(start + torch.arange(li, device=start.device))
        elif not self.relative:
            instr = instr + self.positions.weight[:li]
        elems = (
            self.bag(batch.elem_ids)
            + self.roles(batch.elem_role)
            + self.elem_feats(batch.elem_feats)
            + self.kinds.weight[2]
        )
        fmap = None
        if self.cnn is not None and batch.pixels is not None and batch.elem_pool is not None:
            fmap = self.cnn(batch.pixels)
            elems = elems + self.pixel_elems(pool_elements(fmap, batch.elem_pool))
        glob = (self.global_token + self.kinds.weight[0]).expand(b, 1, -1)
        if self.history is not None and batch.history is not None:
            glob = glob + self.history(batch.history).unsqueeze(1)
        parts, masks = [glob, instr, elems], [batch.instr_mask.new_ones(b, 1), batch.instr_mask]
        masks.append(batch.elem_mask)
        if self.patches is not None and batch.screenshot is not None:
            img = self.patches(batch.screenshot).flatten(2).transpose(1, 2)
            parts.append(img + self.patch_pos + self.kinds.weight[3])
            masks.append(batch.instr_mask.new_ones(b, img.shape[1]))
        if self.n_cells:
            boxes = self.cell_boxes
            geom = torch.cat([(boxes[:, :2] + boxes[:, 2:]) / 2, boxes[:, 2:] - boxes[:, :2]], 1)
            cells = (self.cell_pos + self.cell_geom(geom)).expand(b, -1, -1)
            if fmap is not None:
                cells = cells + self.pixel_cells(pool_cells(fmap, self.grid))
            parts.append(cells + self.kinds.weight[0])
            masks.append(batch.instr_mask.new_ones(b, self.n_cells))
        x = self.in_norm(torch.cat(parts, 1))
        pad = ~torch.cat(masks, 1)
        n = x.shape[1]
        hidden = None  # gated cells: no other token reads a cell inside the transformer
        if self.cell_readback is not None:
            hidden = torch.zeros(n, n, dtype=torch.bool, device=x.device)
            hidden[: n - self.n_cells, n - self.n_cells :] = True
        if self.relative:
            mask = self._relative_mask(pad, li)
            x = self.transformer(
                x, mask=mask if hidden is None else mask.masked_fill(hidden, -math.inf)
            )
        else:
            x = self.transformer(x, mask=hidden, src_key_padding_mask=pad)
        cell_states = x[:, n - self.n_cells :] if self.n_cells else None
        if self.cell_readback is not None:
            rest = x[:, : n - self.n_cells]
            read, _ = self.cell_readback(rest, cell_states, cell_states, need_weights=False)
            x = rest + read
        le = batch.elem_mask.shape[1]
        return Encoded(
            x[:, 0], x[:, 1 : 1 + li], x[:, 1 + li : 1 + li + le], *masks[1:3], cell_states
        )
