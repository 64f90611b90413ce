"""Typed text as a span of the instruction's tokens: a start pointer, then an end pointer.

The typed text is the exact substring of the instruction between the two tokens (at most
``max_span`` tokens long). The pointers start at zero: only typing actions train them, so until
the agent imitates one its span choice is the quote prior alone (the boundaries of a quoted
phrase, ``SmallAgentConfig.quote_prior``), not whatever the encoder's training on other actions
makes of randomly initialised pointers. With relative instruction positions the span's length
is a learned bias of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from devicerl.actions import Action, ActionType
from devicerl.agents.capabilities import ActionKind
from devicerl.agents.small.columns import InstrColumns
from devicerl.agents.small.featurize import ObsMeta
from devicerl.agents.small.heads.base import MASKED, Found, Head, Inputs, Target


def span_text(meta: ObsMeta, start: int, end: int) -> str:
    """The instruction's text from token ``start`` to token ``end`` (inclusive)."""
    return meta.instruction[meta.token_spans[start][0] : meta.token_spans[end][1]]


def _all_spans(meta: ObsMeta, max_span: int) -> list[tuple[int, int]]:
    n = len(meta.token_spans)
    return [(s, e) for s in range(n) for e in range(s, min(n, s + max_span))]


def closest_spans(meta: ObsMeta, text: str, max_span: int) -> tuple[list[tuple[int, int]], bool]:
    """The spans that type ``text`` exactly (True); else those equal to it ignoring case and
    surrounding spaces, else the longest run of tokens that are all words of it (False)."""
    spans = _all_spans(meta, max_span)
    exact = [(s, e) for s, e in spans if span_text(meta, s, e) == text]
    if exact:
        return exact, True
    low = text.strip().lower()
    loose = [(s, e) for s, e in spans if low and span_text(meta, s, e).lower() == low]
    if loose:
        return loose, False
    words = [t.lower() for t in text.split()]
    toks = [meta.instruction[a:b].lower() for a, b in meta.token_spans]
    best: list[tuple[int, int]] = []
    for s, e in spans:
        seg = toks[s : e + 1]
        if all(t in words for t in seg) and (not best or e - s > best[0][1] - best[0][0]):
            best = [(s, e)]
    return best, False


@dataclass
class SpanTarget(Target):
    spans: list[tuple[int, int]]  #: (start, end) token spans that type the text (summed over)


@dataclass
class SpanDraw:
    starts: list[int]
    ends: list[int]


class Span(Head):
    """A span of the instruction (every agent has it; see the module doc)."""

    name = "span"
    action_type = ActionType.TYPE
    options = ("instruction",)
    kinds = frozenset({ActionKind.TYPE_INSTRUCTION})
    plain = True

    def build(self, host: nn.Module) -> None:
        d, cfg = self.cfg.d_model, self.cfg
        self.start_query = self.attach(host, "start_query", nn.Linear(d, d))
        self.start_key = self.attach(host, "start_key", nn.Linear(d, d))
        self.start_score = self.attach(host, "start_score", nn.Linear(d, 1))
        self.end_query = self.attach(host, "end_query", nn.Linear(d, d))
        self.end_key = self.attach(host, "end_key", nn.Linear(d, d))
        self.end_score = self.attach(host, "end_score", nn.Linear(d, 1))
        for layer in (self.start_query, self.start_score, self.end_query, self.end_score):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)
        prior = nn.Parameter(torch.tensor(float(cfg.quote_prior)))
        self.quote_prior = self.attach(host, "quote_prior", prior)
        self.span_length: nn.Parameter | None = None
        if cfg.features.instr_positions == "relative":
            length = nn.Parameter(torch.zeros(cfg.max_span))
            self.span_length = self.attach(host, "span_length", length)
        self.quoted = InstrColumns.of(cfg.features).quoted

    def _logits(self, x: Inputs) -> tuple[torch.Tensor, torch.Tensor]:
        """Masked start [B, Li] and end [B, Li(start), Li(end)] logits."""
        g, instr, mask = x.enc.global_state, x.enc.instr, x.enc.instr_mask
        scale, max_span = 1.0 / math.sqrt(self.cfg.d_model), self.cfg.max_span
        start = torch.einsum("bd,bnd->bn", self.start_query(g), self.start_key(instr)) * scale
        start = start + self.start_score(instr).squeeze(-1)
        end = torch.einsum("bsd,bed->bse", self.end_query(instr), self.end_key(instr)) * scale
        end = end + self.end_score(instr).squeeze(-1).unsqueeze(1)
        idx = torch.arange(instr.shape[1], device=g.device)
        offset = idx.view(1, -1) - idx.view(-1, 1)  # end - start
        end_ok = (offset >= 0) & (offset < max_span)
        if self.span_length is not None:
            end = end + self.span_length[offset.clamp(0, max_span - 1)]
        end_ok = end_ok.unsqueeze(0) & mask.unsqueeze(1)
        q = x.batch.instr_feats[..., self.quoted] * mask  # boundaries of quoted phrases
        first = q * (1 - F.pad(q, (1, 0))[:, :-1])
        last = q * (1 - F.pad(q, (0, 1))[:, 1:])
        start = start + self.quote_prior * first
        end = end + self.quote_prior * last.unsqueeze(1)
        return start.masked_fill(~mask, MASKED), end.masked_fill(~end_ok, MASKED)

    def available(self, x: Inputs) -> torch.Tensor:
        return x.enc.instr_mask.any(1, keepdim=True)

    def forward(self, x: Inputs) -> torch.Tensor:
        """[B, Li(start), Li(end)] log-probs: log p(start) + log p(end | start)."""
        start, end = self._logits(x)
        return x.log_softmax(start).unsqueeze(-1) + x.log_softmax(end)

    def sample_early(self, x, dist: torch.Tensor, draw) -> torch.Tensor:
        """The start, drawn from its marginal before the action type (see `Head`)."""
        return draw.pick(dist.logsumexp(-1)).to(dist.device)

    def sample(self, x, dist: torch.Tensor, chosen, draw, early: torch.Tensor) -> SpanDraw:
        rows = torch.arange(early.shape[0], device=dist.device)
        end = draw.pick(dist[rows, early])
        return SpanDraw([int(s) for s in early.tolist()], [int(e) for e in end.tolist()])

    def action(self, meta: ObsMeta, option: str, drawn: SpanDraw, b: int) -> tuple[Action, dict]:
        if not meta.token_spans:
            return Action.invalid("", "small agent: empty instruction to type from"), {}
        s, e = drawn.starts[b], drawn.ends[b]
        return Action.type_text(span_text(meta, s, e)), {"span": (s, e)}

    def paths(self, meta: ObsMeta, action: Action) -> list[SpanTarget]:
        if action.type is not ActionType.TYPE:
            return []
        every = _all_spans(meta, self.cfg.max_span)
        spans = [(s, e) for s, e in every if span_text(meta, s, e) == action.text]
        return [SpanTarget("instruction", spans)] if spans else []

    def nearest(self, meta: ObsMeta, action: Action) -> Found | None:
        if action.type is not ActionType.TYPE:
            return None
        spans, exact = closest_spans(meta, action.text, self.cfg.max_span)
        return Found([SpanTarget("instruction", spans)], exact, "" if exact else "typed text")

    def extend(self, dist: torch.Tensor, ready, b: int, target: SpanTarget, prior):
        if not target.spans:
            return None
        starts, ends = zip(*target.spans)
        return prior + dist[b, list(starts), list(ends)].logsumexp(0)
