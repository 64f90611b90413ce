"""Typed text from the page (``agent.small.heads: [page_text]``): a span of an element's text
words (MiniWoB++ read-table: type what a cell says). An element pointer, then start and end
pointers over its first ``elem_words`` words (12 unless the features say otherwise).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
from torch import nn

from devicerl.actions import Action, ActionType
from devicerl.agents.capabilities import ActionKind
from devicerl.agents.small.config import FeatureConfig
from devicerl.agents.small.featurize import ObsMeta
from devicerl.agents.small.heads.base import Head, Inputs, Target

#: Words of each element's text kept when the features keep none.
WORDS = 12
_MASKED = -1e9


def page_span_text(meta: ObsMeta, element: int, start: int, end: int) -> str:
    words = meta.elem_words[element]
    return meta.elements[element].text[words[start][0] : words[end][1]]


def page_spans(meta: ObsMeta, text: str, max_span: int) -> list[tuple[int, int, int]]:
    """The (element, start word, end word) spans whose text is exactly ``text``."""
    out = []
    for e, words in enumerate(meta.elem_words):
        for s in range(len(words)):
            for t in range(s, min(len(words), s + max_span)):
                if page_span_text(meta, e, s, t) == text:
                    out.append((e, s, t))
    return out


class PageTextHeads(nn.Module):
    """Element, start-word and end-word pointers over the elements' text words."""

    def __init__(self, d: int, words: int, max_span: int) -> None:
        super().__init__()
        self.max_span = max_span
        self.word_pos = nn.Parameter(torch.zeros(words, d))
        self.from_elem = nn.Linear(d, d)
        self.elem_query, self.elem_key = nn.Linear(d, d), nn.Linear(d, d)
        self.elem_score = nn.Linear(d, 1)
        self.start_query, self.start_key = nn.Linear(d, d), nn.Linear(d, d)
        self.start_score = nn.Linear(d, 1)
        self.end_query, self.end_key = nn.Linear(d, d), nn.Linear(d, d)
        self.end_score = nn.Linear(d, 1)

    def forward(
        self,
        g: torch.Tensor,
        elems: torch.Tensor,
        word_bags: torch.Tensor,
        word_mask: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """g [B, d], elems [B, Le, d], word_bags [B, Le, W, d], word_mask [B, Le, W] -> masked
        logits: element [B, Le], start [B, Le, W], end [B, Le, W, W]."""
        scale = 1.0 / math.sqrt(g.shape[-1])
        w = word_bags.shape[2]
        words = word_bags + self.word_pos[:w] + self.from_elem(elems).unsqueeze(2)
        has_words = word_mask.any(-1)
        elem = torch.einsum("bd,bed->be", self.elem_query(g), self.elem_key(elems)) * scale
        elem = (elem + self.elem_score(elems).squeeze(-1)).masked_fill(~has_words, _MASKED)
        start = torch.einsum("bd,bewd->bew", self.start_query(g), self.start_key(words)) * scale
        start = (start + self.start_score(words).squeeze(-1)).masked_fill(~word_mask, _MASKED)
        end = torch.einsum("besd,betd->best", self.end_query(words), self.end_key(words)) * scale
        end = end + self.end_score(words).squeeze(-1).unsqueeze(2)
        idx = torch.arange(w, device=g.device)
        offset = idx.view(1, -1) - idx.view(-1, 1)
        ok = (offset >= 0) & (offset < self.max_span)
        ok = ok.view(1, 1, w, w) & word_mask.unsqueeze(2)
        return elem, start, end.masked_fill(~ok, _MASKED)


@dataclass
class PageTarget(Target):
    spans: list[tuple[int, int, int]]  #: (element, start word, end word) (summed over)


def _unravel(flat: int, shape: torch.Size) -> tuple[int, ...]:
    out = []
    for n in reversed(shape):
        flat, r = divmod(flat, int(n))
        out.append(r)
    return tuple(out[::-1])


class PageText(Head):
    """A span of an element's text (see the module doc)."""

    name = "page_text"
    action_type = ActionType.TYPE
    options = ("page",)
    kinds = frozenset({ActionKind.TYPE_PAGE})

    @classmethod
    def features(cls, features: FeatureConfig) -> FeatureConfig:
        return features if features.elem_words else dataclasses.replace(features, elem_words=WORDS)

    def build(self, host: nn.Module) -> None:
        cfg = self.cfg
        self.encoder = host.encoder  # its word-piece embedding gives the words' vectors
        words = cfg.features.elem_words
        self.pointers = self.attach(host, "page", PageTextHeads(cfg.d_model, words, cfg.max_span))

    @staticmethod
    def _words(x: Inputs) -> torch.Tensor | None:
        """[B, Le, W] the kept elements' words (None: the features keep none)."""
        if x.batch.elem_word_mask is None:
            return None
        return x.batch.elem_word_mask & x.enc.elem_mask.unsqueeze(-1)

    def available(self, x: Inputs) -> torch.Tensor:
        words = self._words(x)
        if words is None:
            return x.enc.elem_mask.new_zeros(x.enc.elem_mask.shape[0], 1)
        return words.flatten(1).any(1, keepdim=True)

    def forward(self, x: Inputs) -> torch.Tensor | None:
        """[B, Le, W, W] log p(element, start word, end word) (None: no words)."""
        batch, enc, words = x.batch, x.enc, self._words(x)
        if batch.elem_word_ids is None or words is None:
            return None
        b, le, w, p = batch.elem_word_ids.shape
        bags = self.encoder.bag(batch.elem_word_ids.reshape(b, le * w, p)).view(b, le, w, -1)
        elem, start, end = self.pointers(enc.global_state, enc.elems, bags, words)
        return (
            x.log_softmax(elem)[..., None, None]
            + x.log_softmax(start)[..., None]
            + x.log_softmax(end)
        )

    def sample(self, x, dist, chosen, draw, early) -> list[tuple[int, ...]] | None:
        if dist is None:
            return None
        shape = dist.shape[1:]
        return [_unravel(int(f), shape) for f in draw.pick(dist.flatten(1)).tolist()]

    def action(self, meta: ObsMeta, option: str, drawn, b: int) -> tuple[Action, dict]:
        return Action.type_text(page_span_text(meta, *drawn[b])), {}

    def paths(self, meta: ObsMeta, action: Action) -> list[PageTarget]:
        if action.type is not ActionType.TYPE:
            return []
        spans = page_spans(meta, action.text, self.cfg.max_span)
        return [PageTarget("page", spans)] if spans else []

    def extend(self, dist: torch.Tensor | None, ready, b: int, target: PageTarget, prior):
        if dist is None:
            return None
        e, s, t = (list(v) for v in zip(*target.spans))
        return prior + dist[b, e, s, t].logsumexp(0)
