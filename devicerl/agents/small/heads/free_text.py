"""Typed text of any kind (``agent.small.heads: [free_text]``): a character decoder (a GRU)
with copy, for text that appears nowhere verbatim (a case change, a sum).

At each step it mixes writing a character from a small vocabulary (printable ASCII) with
copying one of the instruction's characters (attention over them, each known by itself, its
place in its word and its word's state; the decoder is fed what it attended to last, so it can
walk through a word), and the vocabulary distribution also reads the attended characters, so
"copy this letter in upper case" is learnable. The probability of a character is the sum over
every way to produce it (generated, or copied from any position holding it), so the log-prob of
a text is exact and does not depend on how it was produced; a text ends with an end symbol, or
at ``max_chars`` characters. The decoder runs only on the rows that write (or score) a text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from devicerl.actions import Action, ActionType
from devicerl.agents.capabilities import ActionKind
from devicerl.agents.small.featurize import ObsMeta
from devicerl.agents.small.heads.base import Head, Inputs, Target

_FIRST, _LAST = 32, 126  # printable ASCII
#: Output symbols: 0 ends the text, 1..95 are the printable ASCII characters.
VOCAB = _LAST - _FIRST + 2
#: Input symbol for a character outside the vocabulary (it can only be copied).
UNK = VOCAB
#: Instruction characters the decoder can copy from.
MAX_SOURCE = 200
#: Places inside a word told apart (later characters share the last).
MAX_IN_TOKEN = 16
_MASKED = -1e9


def char_id(c: str) -> int:
    o = ord(c)
    return o - _FIRST + 1 if _FIRST <= o <= _LAST else UNK


def can_write(text: str, source: str, max_chars: int) -> bool:
    """True when the decoder can produce ``text`` (non-empty, short enough, every character
    in the vocabulary or copyable from ``source``)."""
    src = set(source[:MAX_SOURCE])
    return 0 < len(text) <= max_chars and all(char_id(c) != UNK or c in src for c in text)


class CharSource:
    """The instruction characters a batch's decoder copies from (tensors on ``device``)."""

    def __init__(self, metas: Sequence[ObsMeta], device: torch.device) -> None:
        self.texts = [m.instruction[:MAX_SOURCE] for m in metas]
        n = max(1, max(len(t) for t in self.texts))
        ids = torch.zeros(len(metas), n, dtype=torch.long)
        tok = torch.full((len(metas), n), -1, dtype=torch.long)
        pos = torch.zeros(len(metas), n, dtype=torch.long)
        mask = torch.zeros(len(metas), n, dtype=torch.bool)
        for b, (m, text) in enumerate(zip(metas, self.texts)):
            ids[b, : len(text)] = torch.tensor([char_id(c) for c in text], dtype=torch.long)
            mask[b, : len(text)] = True
            for i, (s, e) in enumerate(m.token_spans):
                e = min(e, len(text))
                tok[b, s:e] = i
                pos[b, s:e] = torch.arange(e - s).clamp(max=MAX_IN_TOKEN - 1)
        self.ids, self.tok, self.mask = ids.to(device), tok.to(device), mask.to(device)
        self.pos = pos.to(device)

    def match(self, rows: Sequence[int], chars: Sequence[str]) -> torch.Tensor:
        """[N, Ls] bool: source positions of row ``rows[i]`` holding character ``chars[i]``."""
        out = torch.zeros(len(rows), self.ids.shape[1], dtype=torch.bool)
        for i, (b, c) in enumerate(zip(rows, chars)):
            if c:
                for p, s in enumerate(self.texts[b]):
                    if s == c:
                        out[i, p] = True
        return out.to(self.ids.device)


class CharDecoder(nn.Module):
    """The free-text decoder (see the module doc)."""

    def __init__(self, d: int, max_chars: int) -> None:
        super().__init__()
        self.max_chars = max_chars
        self.embed = nn.Embedding(VOCAB + 1, d)
        self.in_token = nn.Embedding(MAX_IN_TOKEN, d)  # a character's place in its word
        self.from_token = nn.Linear(d, d)
        self.init = nn.Linear(d, d)
        self.cell = nn.GRUCell(d, d)
        self.query, self.key = nn.Linear(d, d), nn.Linear(d, d)
        self.vocab = nn.Linear(2 * d, VOCAB)
        self.gate = nn.Linear(2 * d, 1)

    def memory(self, instr: torch.Tensor, src: CharSource) -> torch.Tensor:
        """Per source character: its embedding, its place in its word and that word's state."""
        pad = F.pad(instr, (0, 0, 0, 1))  # index -1 -> the zero row
        idx = src.tok.clamp(min=-1) % pad.shape[1]
        tokens = torch.gather(pad, 1, idx.unsqueeze(-1).expand(-1, -1, pad.shape[-1]))
        return self.embed(src.ids) + self.in_token(src.pos) + self.from_token(tokens)

    def step(
        self,
        h: torch.Tensor,
        prev: torch.Tensor,
        ctx: torch.Tensor,
        mem: torch.Tensor,
        mask: torch.Tensor,
        temperature: float,
        first: bool,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step from the previous symbol and attended context: the new state and context,
        log-probs of writing each vocabulary symbol [N, VOCAB] and of copying each source
        position [N, Ls] (the two sum to one over all options)."""
        h = self.cell(self.embed(prev) + ctx, h)
        scale = 1.0 / math.sqrt(h.shape[-1])
        att = torch.einsum("nd,nsd->ns", self.query(h), self.key(mem)) * scale
        att = F.log_softmax((att / temperature).masked_fill(~mask, _MASKED), -1)
        ctx = torch.einsum("ns,nsd->nd", att.exp(), mem)
        both = torch.cat([h, ctx], -1)
        vocab = self.vocab(both) / temperature
        if first:  # a text has at least one character
            vocab = vocab.clone()
            vocab[:, 0] = _MASKED
        gate = self.gate(both).squeeze(-1) / temperature
        write = F.log_softmax(vocab, -1) + F.logsigmoid(gate).unsqueeze(-1)
        copy = att + F.logsigmoid(-gate).unsqueeze(-1)
        return h, ctx, write, copy.masked_fill(~mask, _MASKED)

    def log_prob(
        self,
        g: torch.Tensor,
        mem: torch.Tensor,
        src: CharSource,
        rows: Sequence[int],
        texts: Sequence[str],
        temperature: float,
    ) -> torch.Tensor:
        """Exact log-probs [N] of writing ``texts[i]`` for batch row ``rows[i]`` (teacher
        forcing; every text must pass `can_write`)."""
        idx = torch.tensor(list(rows), device=g.device, dtype=torch.long)
        h, mem_r, mask = torch.tanh(self.init(g[idx])), mem[idx], src.mask[idx]
        steps = max(min(len(t) + 1, self.max_chars) for t in texts)
        total = g.new_zeros(len(texts))
        prev = torch.zeros(len(texts), dtype=torch.long, device=g.device)
        ctx = torch.zeros_like(h)
        for t in range(steps):
            h, ctx, write, copy = self.step(h, prev, ctx, mem_r, mask, temperature, t == 0)
            chars = [s[t] if t < len(s) else "" for s in texts]
            sym = torch.tensor([char_id(c) if c else 0 for c in chars], device=g.device)
            in_vocab = sym < UNK
            lp_write = write.gather(1, sym.clamp(max=VOCAB - 1).unsqueeze(1)).squeeze(1)
            lp_write = lp_write.masked_fill(~in_vocab, _MASKED)
            lp_copy = copy.masked_fill(~src.match(rows, chars), _MASKED).logsumexp(-1)
            lp = torch.logaddexp(lp_write, lp_copy)
            live = torch.tensor(
                [t < len(s) + 1 and t < self.max_chars for s in texts], device=g.device
            )
            total = total + torch.where(live, lp, torch.zeros_like(lp))
            prev = torch.where(in_vocab, sym, torch.full_like(sym, UNK))
        return total

    @torch.no_grad()
    def sample(
        self,
        g: torch.Tensor,
        mem: torch.Tensor,
        src: CharSource,
        rows: Sequence[int],
        temperature: float,
        generator: torch.Generator,
        greedy: bool,
    ) -> list[str]:
        """Write one text per row in ``rows`` (the most likely character each step if greedy)."""
        idx = torch.tensor(list(rows), device=g.device, dtype=torch.long)
        h, mem_r, mask = torch.tanh(self.init(g[idx])), mem[idx], src.mask[idx]
        ids_r = src.ids[idx]
        out = [""] * len(rows)
        done = [False] * len(rows)
        prev = torch.zeros(len(rows), dtype=torch.long, device=g.device)
        ctx = torch.zeros_like(h)
        for t in range(self.max_chars):
            h, ctx, write, copy = self.step(h, prev, ctx, mem_r, mask, temperature, t == 0)
            p_write, p_copy = write.exp(), copy.exp() * mask
            # merge copies of vocabulary characters into their symbol: one option per character
            known = ids_r < UNK
            p_write = p_write.scatter_add(1, ids_r.clamp(max=VOCAB - 1), p_copy * known)
            probs = torch.cat([p_write, p_copy * ~known], -1).float().cpu()
            if greedy:
                pick = probs.argmax(-1)
            else:
                pick = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
            nxt = []
            for i, k in enumerate(pick.tolist()):
                if k == 0:
                    done[i] = True
                elif not done[i]:
                    src_text = src.texts[rows[i]]
                    out[i] += chr(k - 1 + _FIRST) if k < VOCAB else src_text[k - VOCAB]
                nxt.append(0 if k == 0 else (k if k < VOCAB else UNK))
            if all(done):
                break
            prev = torch.tensor(nxt, device=g.device)
        return out


@dataclass
class FreeTarget(Target):
    text: str


class FreeText(Head):
    """The character decoder's text (see the module doc)."""

    name = "free_text"
    action_type = ActionType.TYPE
    options = ("free",)
    #: it also writes any page or instruction text
    kinds = frozenset({ActionKind.TYPE_COMPUTED, ActionKind.TYPE_PAGE})

    def build(self, host: nn.Module) -> None:
        self.chars = self.attach(host, "chars", CharDecoder(self.cfg.d_model, self.cfg.max_chars))

    def available(self, x: Inputs) -> torch.Tensor:
        return x.enc.instr_mask.new_ones(x.enc.instr_mask.shape[0], 1)

    def forward(self, x: Inputs) -> None:
        return None  # the decoder runs on the rows that write or score a text

    def _memory(self, x: Inputs) -> tuple[CharSource, torch.Tensor]:
        src = CharSource(x.metas, x.enc.global_state.device)
        return src, self.chars.memory(x.enc.instr, src)

    def sample(self, x: Inputs, dist, chosen, draw, early) -> dict[int, str]:
        rows = chosen.rows(self, "free")
        if not rows:
            return {}
        src, mem = self._memory(x)
        g, t = x.enc.global_state, x.temperature
        texts = self.chars.sample(g, mem, src, rows, t, draw.generator, draw.greedy)
        return dict(zip(rows, texts))

    def action(self, meta: ObsMeta, option: str, drawn: dict[int, str], b: int):
        return Action.type_text(drawn[b]), {}

    def paths(self, meta: ObsMeta, action: Action) -> list[FreeTarget]:
        if action.type is not ActionType.TYPE:
            return []
        if not can_write(action.text, meta.instruction, self.cfg.max_chars):
            return []
        return [FreeTarget("free", action.text)]

    def prepare(self, x: Inputs, dist, wanted) -> dict[int, torch.Tensor]:
        """The decoder's log-probs of the texts to score, batched."""
        frees = [(b, t.text) for b, t in wanted if isinstance(t, FreeTarget)]
        if not frees:
            return {}
        src, mem = self._memory(x)
        rows = [b for b, _ in frees]
        g, texts = x.enc.global_state, [t for _, t in frees]
        out = self.chars.log_prob(g, mem, src, rows, texts, x.temperature)
        return {b: out[i] for i, b in enumerate(rows)}

    def extend(self, dist, ready: dict[int, torch.Tensor], b: int, target, prior):
        return prior + ready[b]
