"""The small agent's network: `SmallEncoder` (reusable for critics) and the action heads.

The encoder is one transformer over a global token, the instruction tokens, the UI elements and
(optionally) patches of a downscaled screenshot. Heads read the global token (action type,
gesture), the element states (a pointer: which element to tap) and the instruction token states
(start/end pointers of the text span to type).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from devicerl.actions import VALID_TYPES, ActionType
from devicerl.agents.config import SmallAgentConfig
from devicerl.agents.featurize import (
    GLOBAL_HISTORY,
    INSTR_QUOTED,
    ROLE_BUCKETS,
    FeatureBatch,
)

#: Sub-choices of a DUAL_POINT action: a tap on an element, or a swipe in a direction.
GESTURES = ("tap", "up", "down", "left", "right")
#: Logit given to impossible choices (finite, so log-softmax and gradients stay finite).
MASKED = -1e9
_DUAL = VALID_TYPES.index(ActionType.DUAL_POINT)
_TYPE = VALID_TYPES.index(ActionType.TYPE)


class Encoded(NamedTuple):
    """Encoder outputs: the global state and per-token states (with their masks)."""

    global_state: torch.Tensor  # [B, d]
    instr: torch.Tensor  # [B, Li, d]
    elems: torch.Tensor  # [B, Le, d]
    instr_mask: torch.Tensor  # [B, Li]
    elem_mask: torch.Tensor  # [B, Le]


class HeadLogits(NamedTuple):
    """Masked logits of every head."""

    type: torch.Tensor  # [B, len(VALID_TYPES)]
    gesture: torch.Tensor  # [B, len(GESTURES)]
    element: torch.Tensor  # [B, Le]
    start: torch.Tensor  # [B, Li]
    end: torch.Tensor  # [B, Li(start), Li(end)]


class SmallEncoder(nn.Module):
    """Encodes a `FeatureBatch`; critics can reuse it (e.g. a value head on ``global_state``)."""

    def __init__(self, cfg: SmallAgentConfig) -> None:
        super().__init__()
        d, fc = cfg.d_model, cfg.features
        self.d_model = d
        self.pieces = nn.EmbeddingBag(fc.buckets, d, mode="mean", padding_idx=0)
        self.roles = nn.Embedding(ROLE_BUCKETS, d, padding_idx=0)
        self.positions = nn.Embedding(fc.max_instr_tokens, d)
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

    def _bag(self, ids: torch.Tensor) -> torch.Tensor:
        b, n, p = ids.shape
        return self.pieces(ids.reshape(b * n, p)).reshape(b, n, -1)

    def forward(self, batch: FeatureBatch) -> Encoded:
        b, li = batch.instr_mask.shape
        instr = (
            self._bag(batch.instr_ids)
            + self.positions.weight[:li]
            + self.instr_feats(batch.instr_feats)
            + self.kinds.weight[1]
        )
        elems = (
            self._bag(batch.elem_ids)
            + self.roles(batch.elem_role)
            + self.elem_feats(batch.elem_feats)
            + self.kinds.weight[2]
        )
        glob = (self.global_token + self.kinds.weight[0]).expand(b, 1, -1)
        if self.history is not None and batch.history is not None:
            glob = glob + self.history(batch.history).unsqueeze(1)
        parts, masks = [glob, instr, elems], [batch.instr_mask.new_ones(b, 1), batch.instr_mask]
        masks.append(batch.elem_mask)
        if self.patches is not None and batch.screenshot is not None:
            img = self.patches(batch.screenshot).flatten(2).transpose(1, 2)
            parts.append(img + self.patch_pos + self.kinds.weight[3])
            masks.append(batch.instr_mask.new_ones(b, img.shape[1]))
        x = self.in_norm(torch.cat(parts, 1))
        x = self.transformer(x, src_key_padding_mask=~torch.cat(masks, 1))
        le = batch.elem_mask.shape[1]
        return Encoded(x[:, 0], x[:, 1 : 1 + li], x[:, 1 + li : 1 + li + le], *masks[1:3])


class SmallPolicyNet(nn.Module):
    """Encoder + action heads, producing masked logits (`HeadLogits`)."""

    def __init__(self, cfg: SmallAgentConfig) -> None:
        super().__init__()
        d = cfg.d_model
        self.cfg = cfg
        self.encoder = SmallEncoder(cfg)
        self.type_head = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, len(VALID_TYPES)))
        self.gesture_head = nn.Linear(d, len(GESTURES))
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
        allowed = torch.ones(len(VALID_TYPES), dtype=torch.bool)
        if cfg.allowed_types is not None:
            allowed = torch.tensor([t.value in cfg.allowed_types for t in VALID_TYPES])
        self.register_buffer("allowed_types", allowed, persistent=False)
        self.quote_prior = nn.Parameter(torch.tensor(float(cfg.quote_prior)))

    def forward(self, batch: FeatureBatch) -> HeadLogits:
        enc = self.encoder(batch)
        return self.heads(enc, batch.instr_feats[..., INSTR_QUOTED])

    def heads(self, enc: Encoded, quoted: torch.Tensor | None = None) -> HeadLogits:
        cfg, scale = self.cfg, 1.0 / math.sqrt(self.cfg.d_model)
        g, instr, elems = enc.global_state, enc.instr, enc.elems
        has_elems, has_tokens = enc.elem_mask.any(1), enc.instr_mask.any(1)
        type_ok = self.allowed_types.expand(g.shape[0], -1).clone()
        type_ok[:, _DUAL] &= has_elems | cfg.swipes
        type_ok[:, _TYPE] &= has_tokens
        gest_ok = torch.zeros(g.shape[0], len(GESTURES), dtype=torch.bool, device=g.device)
        gest_ok[:, 0] = has_elems
        gest_ok[:, 1:] = cfg.swipes
        elem = torch.einsum("bd,bnd->bn", self.elem_query(g), self.elem_key(elems)) * scale
        elem = elem + self.elem_score(elems).squeeze(-1)
        start = torch.einsum("bd,bnd->bn", self.start_query(g), self.start_key(instr)) * scale
        start = start + self.start_score(instr).squeeze(-1)
        end = torch.einsum("bsd,bed->bse", self.end_query(instr), self.end_key(instr)) * scale
        end = end + self.end_score(instr).squeeze(-1).unsqueeze(1)
        if quoted is not None:  # boundaries of quoted phrases (see SmallAgentConfig.quote_prior)
            q = quoted * enc.instr_mask
            first = q * (1 - F.pad(q, (1, 0))[:, :-1])
            last = q * (1 - F.pad(q, (0, 1))[:, 1:])
            start = start + self.quote_prior * first
            end = end + self.quote_prior * last.unsqueeze(1)
        li = instr.shape[1]
        idx = torch.arange(li, device=g.device)
        offset = idx.view(1, -1) - idx.view(-1, 1)  # end - start
        end_ok = (offset >= 0) & (offset < cfg.max_span)
        end_ok = end_ok.unsqueeze(0) & enc.instr_mask.unsqueeze(1)
        return HeadLogits(
            self.type_head(g).masked_fill(~type_ok, MASKED),
            self.gesture_head(g).masked_fill(~gest_ok, MASKED),
            elem.masked_fill(~enc.elem_mask, MASKED),
            start.masked_fill(~enc.instr_mask, MASKED),
            end.masked_fill(~end_ok, MASKED),
        )
