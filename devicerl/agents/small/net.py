"""The small agent's network: `SmallEncoder` (reusable for critics) and the action heads.

The encoder is one transformer over a global token, the instruction tokens, the UI elements and
(optionally) patches of a downscaled screenshot. Heads read the global token (action type,
gesture), the element states (a pointer: which element to tap) and the instruction token states
(start/end pointers of the text span to type). With point actions or pixels, grid cells join as
tokens: shared with the others, or gated (the others read them only through a cross-attention
that starts closed; see ``SmallAgentConfig.cell_attention``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from devicerl.actions import AITW_TYPES, ActionType
from devicerl.agents.small.config import SmallAgentConfig
from devicerl.agents.small.featurize import (
    GLOBAL_HISTORY,
    INSTR_QUOTED,
    ROLE_BUCKETS,
    FeatureBatch,
)
from devicerl.agents.small.pixels import PixelCNN, pool_cells, pool_elements
from devicerl.agents.small.point import PointHeads
from devicerl.agents.small.text import CharDecoder, PageTextHeads

#: Offsets between instruction tokens beyond this share one attention bias (relative positions).
REL_CLIP = 8
#: Sub-choices of a DUAL_POINT action: a tap on an element's centre, a swipe in a direction
#: from the screen centre, and with ``point_actions`` a tap at a chosen point or a drag
#: between two chosen points.
GESTURES = ("tap", "up", "down", "left", "right", "point", "drag")
#: Gestures of an agent without ``point_actions``.
BASIC_GESTURES = 5
POINT, DRAG = GESTURES.index("point"), GESTURES.index("drag")
#: Logit given to impossible choices (finite, so log-softmax and gradients stay finite).
MASKED = -1e9
#: The logit a choice that a grown agent adds starts at (`SmallPolicyNet.quiet`).
QUIET_LOGIT = -4.0
_DUAL = AITW_TYPES.index(ActionType.DUAL_POINT)
_TYPE = AITW_TYPES.index(ActionType.TYPE)


class Encoded(NamedTuple):
    """Encoder outputs: the global state and per-token states (with their masks)."""

    global_state: torch.Tensor  # [B, d]
    instr: torch.Tensor  # [B, Li, d]
    elems: torch.Tensor  # [B, Le, d]
    instr_mask: torch.Tensor  # [B, Li]
    elem_mask: torch.Tensor  # [B, Le]
    cells: torch.Tensor | None = None  # [B, n_cells, d] (see SmallAgentConfig.n_cells)


class HeadLogits(NamedTuple):
    """Masked logits of every head."""

    type: torch.Tensor  # [B, len(AITW_TYPES)]
    gesture: torch.Tensor  # [B, len(GESTURES)]
    element: torch.Tensor  # [B, Le]
    start: torch.Tensor  # [B, Li]
    end: torch.Tensor  # [B, Li(start), Li(end)]
    #: The encoder's outputs, for heads computed after a first choice (drag lift, free text).
    enc: Encoded | None = None
    #: [B, Le + n_cells] anchor and [B, Le + n_cells, offsets^2] offset logits of a touch point
    touch: tuple[torch.Tensor, torch.Tensor] | None = None
    source: torch.Tensor | None = None  # [B, 3] typed-text source (instruction, page, free)
    #: page-text spans: element [B, Le], start [B, Le, W], end [B, Le, W, W]
    page: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None


def cell_boxes(grid: tuple[int, int]) -> torch.Tensor:
    """Normalised (left, top, right, bottom) of each grid cell, row by row: [cols * rows, 4]."""
    cols, rows = grid
    c = torch.arange(cols * rows)
    x, y = (c % cols).float(), (c // cols).float()
    return torch.stack([x / cols, y / rows, (x + 1) / cols, (y + 1) / rows], 1)


class SmallEncoder(nn.Module):
    """Encodes a `FeatureBatch`; critics can reuse it (e.g. a value head on ``global_state``)."""

    def __init__(self, cfg: SmallAgentConfig) -> None:
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
        self.history = nn.Linear(GLOBAL_HISTORY, d) if fc.history else None
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
        self.n_cells, self.grid = cfg.n_cells, cfg.grid
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

    def _bag(self, ids: torch.Tensor) -> torch.Tensor:
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
            self._bag(batch.instr_ids) + self.instr_feats(batch.instr_feats) + self.kinds.weight[1]
        )
        if self.shift:  # the same instruction always gets the same offset (log-probs agree)
            start = batch.instr_ids[:, :, 0].sum(1, keepdim=True) % self.shift
            instr = instr + self.positions(start + torch.arange(li, device=start.device))
        elif not self.relative:
            instr = instr + self.positions.weight[:li]
        elems = (
            self._bag(batch.elem_ids)
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


class SmallPolicyNet(nn.Module):
    """Encoder + action heads, producing masked logits (`HeadLogits`)."""

    def __init__(self, cfg: SmallAgentConfig) -> None:
        super().__init__()
        d = cfg.d_model
        self.cfg = cfg
        self.encoder = SmallEncoder(cfg)
        self.type_head = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, len(AITW_TYPES)))
        self.gesture_head = nn.Linear(d, BASIC_GESTURES)
        self.elem_query, self.elem_key = nn.Linear(d, d), nn.Linear(d, d)
        self.elem_score = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, 1))
        self.start_query, self.start_key = nn.Linear(d, d), nn.Linear(d, d)
        self.start_score = nn.Linear(d, 1)
        self.end_query, self.end_key = nn.Linear(d, d), nn.Linear(d, d)
        self.end_score = nn.Linear(d, 1)
        # The span pointers start at zero: only typing actions train them, so until the agent
        # imitates one its span choice is the quote prior alone, not whatever the encoder's
        # training on other actions makes of randomly initialised pointers.
        for layer in (self.start_query, self.start_score, self.end_query, self.end_score):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)
        allowed = torch.ones(len(AITW_TYPES), dtype=torch.bool)
        if cfg.allowed_types is not None:
            allowed = torch.tensor([t.value in cfg.allowed_types for t in AITW_TYPES])
        self.register_buffer("allowed_types", allowed, persistent=False)
        self.quote_prior = nn.Parameter(torch.tensor(float(cfg.quote_prior)))
        # Later additions, built only when on (older configs initialise exactly as before).
        self.more_gestures = nn.Linear(d, 2) if cfg.point_actions else None
        self.points = PointHeads(d, cfg.offsets) if cfg.point_actions else None
        self.source_head = nn.Linear(d, 3) if cfg.page_text or cfg.free_text else None
        self.page = (
            PageTextHeads(d, cfg.features.elem_words, cfg.max_span) if cfg.page_text else None
        )
        self.chars = CharDecoder(d, cfg.max_chars) if cfg.free_text else None
        # with relative positions, the typed span's length is a learned bias of its own
        self.span_length = (
            nn.Parameter(torch.zeros(cfg.max_span)) if self.encoder.relative else None
        )

    @torch.no_grad()
    def quiet(
        self, fresh: set[str], new_types: set[ActionType], old_types: set[ActionType]
    ) -> None:
        """After loading a saved agent that lacks some parts (`fresh`: their weight names), make
        the grown agent act as the saved one did until it learns otherwise. The pixel
        projections start at zero (element and cell states as without pixels). Each choice the
        saved agent did not have starts `QUIET_LOGIT` below one it had, whatever the state: a
        point tap or a drag below the element tap, page text and characters below instruction
        spans, an action type now allowed (`new_types`) below one of `old_types`. Greedy acts as
        before; sampling and exploration still reach the new choices."""
        enc = self.encoder
        for name in ("pixel_elems", "pixel_cells"):
            layer = getattr(enc, name, None)
            if layer is not None and f"encoder.{name}.weight" in fresh:
                nn.init.zeros_(layer.weight)
                nn.init.zeros_(layer.bias)
        if self.more_gestures is not None and "more_gestures.weight" in fresh:
            self.more_gestures.weight.copy_(self.gesture_head.weight[:1].expand(2, -1))
            self.more_gestures.bias.copy_(self.gesture_head.bias[:1] + QUIET_LOGIT)
        if self.source_head is not None and "source_head.weight" in fresh:
            nn.init.zeros_(self.source_head.weight)  # instruction spans, page text, characters
            self.source_head.bias.copy_(torch.tensor([0.0, QUIET_LOGIT, QUIET_LOGIT]))
        out = self.type_head[-1]
        assert isinstance(out, nn.Linear)
        if new_types and old_types:
            ref = min(AITW_TYPES.index(t) for t in old_types)
            for t in new_types:
                out.weight[AITW_TYPES.index(t)] = out.weight[ref]
                out.bias[AITW_TYPES.index(t)] = out.bias[ref] + QUIET_LOGIT

    def forward(self, batch: FeatureBatch) -> HeadLogits:
        enc = self.encoder(batch)
        return self.heads(enc, batch.instr_feats[..., INSTR_QUOTED], batch)

    def anchors(self, enc: Encoded) -> tuple[torch.Tensor, torch.Tensor]:
        """Point anchors (grid cells, then elements) and their mask."""
        assert enc.cells is not None
        mask = torch.cat([enc.elem_mask.new_ones(enc.cells.shape[:2]), enc.elem_mask], 1)
        return torch.cat([enc.cells, enc.elems], 1), mask

    def lift(self, enc: Encoded, touch_xy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Masked anchor and offset logits of a drag's lift point, given its touch point."""
        assert self.points is not None
        anchors, mask = self.anchors(enc)
        logits, offsets = self.points.lift_logits(enc.global_state, anchors, touch_xy)
        return logits.masked_fill(~mask, MASKED), offsets

    def heads(
        self, enc: Encoded, quoted: torch.Tensor | None = None, batch: FeatureBatch | None = None
    ) -> HeadLogits:
        cfg, scale = self.cfg, 1.0 / math.sqrt(self.cfg.d_model)
        g, instr, elems = enc.global_state, enc.instr, enc.elems
        has_elems, has_tokens = enc.elem_mask.any(1), enc.instr_mask.any(1)
        type_ok = self.allowed_types.expand(g.shape[0], -1).clone()
        type_ok[:, _DUAL] &= has_elems | cfg.swipes | cfg.point_actions
        n_gest = BASIC_GESTURES + (2 if cfg.point_actions else 0)
        gest_ok = torch.zeros(g.shape[0], n_gest, dtype=torch.bool, device=g.device)
        gest_ok[:, 0] = has_elems
        gest_ok[:, 1:BASIC_GESTURES] = cfg.swipes
        gest_ok[:, BASIC_GESTURES:] = True
        gesture = self.gesture_head(g)
        if self.more_gestures is not None:
            gesture = torch.cat([gesture, self.more_gestures(g)], -1)
        touch = None
        if self.points is not None:
            anchors, anchor_mask = self.anchors(enc)
            t_logits, t_offsets = self.points.touch(g, anchors)
            touch = (t_logits.masked_fill(~anchor_mask, MASKED), t_offsets)
        page = None
        has_page = torch.zeros_like(has_tokens)
        if self.page is not None and batch is not None and batch.elem_word_ids is not None:
            assert batch.elem_word_mask is not None
            b, le, w, p = batch.elem_word_ids.shape
            bags = self.encoder._bag(batch.elem_word_ids.reshape(b, le * w, p)).view(b, le, w, -1)
            word_mask = batch.elem_word_mask & enc.elem_mask.unsqueeze(-1)
            page = self.page(g, elems, bags, word_mask)
            has_page = word_mask.flatten(1).any(1)
        source = None
        if self.source_head is not None:
            src_ok = torch.stack(
                [has_tokens, has_page, torch.full_like(has_tokens, cfg.free_text)], 1
            )
            source = self.source_head(g).masked_fill(~src_ok, MASKED)
            has_tokens = src_ok.any(1)
        type_ok[:, _TYPE] &= has_tokens
        elem = torch.einsum("bd,bnd->bn", self.elem_query(g), self.elem_key(elems)) * scale
        elem = elem + self.elem_score(elems).squeeze(-1)
        start = torch.einsum("bd,bnd->bn", self.start_query(g), self.start_key(instr)) * scale
        start = start + self.start_score(instr).squeeze(-1)
        end = torch.einsum("bsd,bed->bse", self.end_query(instr), self.end_key(instr)) * scale
        end = end + self.end_score(instr).squeeze(-1).unsqueeze(1)
        li = instr.shape[1]
        idx = torch.arange(li, device=g.device)
        offset = idx.view(1, -1) - idx.view(-1, 1)  # end - start
        end_ok = (offset >= 0) & (offset < cfg.max_span)
        if self.span_length is not None:  # the span's length (relative positions)
            end = end + self.span_length[offset.clamp(0, cfg.max_span - 1)]
        end_ok = end_ok.unsqueeze(0) & enc.instr_mask.unsqueeze(1)
        if quoted is not None:  # boundaries of quoted phrases (see SmallAgentConfig.quote_prior)
            q = quoted * enc.instr_mask
            first = q * (1 - F.pad(q, (1, 0))[:, :-1])
            last = q * (1 - F.pad(q, (0, 1))[:, 1:])
            start = start + self.quote_prior * first
            end = end + self.quote_prior * last.unsqueeze(1)
        return HeadLogits(
            self.type_head(g).masked_fill(~type_ok, MASKED),
            gesture.masked_fill(~gest_ok, MASKED),
            elem.masked_fill(~enc.elem_mask, MASKED),
            start.masked_fill(~enc.instr_mask, MASKED),
            end.masked_fill(~end_ok, MASKED),
            enc,
            touch,
            source,
            page,
        )
