"""Observations to padded tensors for the small agent (and critics built on its encoder).

Per instruction token: hashed word/n-gram ids and features (occurs in an element's text or value,
is a number, is punctuation, is capitalised, is inside quotes, relative position).
Per UI element: hashed ids of its text and value, its role, flags, normalised box and explicit
instruction-overlap features ("the element's text occurs in the instruction", word overlap in
both directions, where in the instruction it matches). These overlap features are the inductive
bias that lets a small model learn tap/type tasks in seconds. Matching is on lower-cased word
sequences, so "Submit" matches "press submit" but not "submitted".

With ``history`` on, the episode's earlier actions (``Observation.previous_actions``, filled by
the collector for agents whose ``uses_history`` is true) add features: per element, whether the
last action tapped it and how often earlier actions did; per instruction token, whether the
last / an earlier action typed it; and a global row (the last action's type, how many actions
so far, whether the last action repeated the one before, how many TYPE actions so far; an
earlier action of a type the type head does not choose among sets no type column). An
agent without them sees the same input after a no-op action (e.g. typing with no text box
focused) and, decoding greedily, repeats that action until the step budget runs out.

`featurize` also returns, per observation, the bookkeeping that maps model outputs back to
actions: the character span of each kept instruction token and the tap point of each kept
element. When a page has more than ``max_elements`` elements, the interactive or labelled ones
are kept first (then page order); the choice depends only on the observation, so `act` and
`log_prob` always see the same elements. Where each feature sits in a row is
`devicerl.agents.small.columns`.
"""

from __future__ import annotations

import math
import re
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from devicerl.actions import AITW_TYPES, Action, ActionType
from devicerl.agents.small.columns import (
    ELEM_HISTORY,
    INSTR_HISTORY,
    ElemColumns,
    HistoryColumns,
    InstrColumns,
)
from devicerl.agents.small.config import PIXEL_STRIDE, FeatureConfig
from devicerl.agents.small.field_labels import element_rows, field_labels, token_rows
from devicerl.agents.small.tokenize import HashTokenizer, split_words, stable_hash
from devicerl.records import Observation, UIElement

_POINT_TOL = 1e-6
ROLE_BUCKETS = 256


@dataclass
class ObsMeta:
    """What maps model outputs back to one observation's actions."""

    instruction: str
    token_spans: list[tuple[int, int]]
    elements: list[UIElement]
    tap_points: list[tuple[float, float]]
    screen_size: tuple[int, int]
    #: Per kept element, the character spans of its first ``elem_words`` text words.
    elem_words: list[list[tuple[int, int]]] = field(default_factory=list)


@dataclass
class FeatureBatch:
    """A padded batch. Masks are True at real (non-padding) positions."""

    instr_ids: torch.Tensor  # [B, Li, P] long
    instr_feats: torch.Tensor  # [B, Li, config.instr_features]
    instr_mask: torch.Tensor  # [B, Li] bool
    elem_ids: torch.Tensor  # [B, Le, Pe] long
    elem_role: torch.Tensor  # [B, Le] long
    elem_feats: torch.Tensor  # [B, Le, config.elem_features]
    elem_mask: torch.Tensor  # [B, Le] bool
    screenshot: torch.Tensor | None  # [B, 3, H, W] float in [0, 1]
    meta: list[ObsMeta] = field(default_factory=list)
    history: torch.Tensor | None = None  # [B, HistoryColumns.width] with ``history`` on
    pixels: torch.Tensor | None = None  # [B, 3, H, W] in [0, 1] with ``pixels`` on
    #: [B, Le, H/4 * W/4]: each element's share of the CNN output cells (rows sum to 1)
    elem_pool: torch.Tensor | None = None
    elem_word_ids: torch.Tensor | None = None  # [B, Le, elem_words, P] with ``elem_words``
    elem_word_mask: torch.Tensor | None = None  # [B, Le, elem_words] bool

    def to(self, device: torch.device | str) -> FeatureBatch:
        moved: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            v = getattr(self, name)
            if isinstance(v, torch.Tensor) and v.is_floating_point():  # the model's dtype
                v = v.to(device, torch.get_default_dtype())
            moved[name] = v.to(device) if isinstance(v, torch.Tensor) else v
        return FeatureBatch(**moved)

    def __len__(self) -> int:
        return int(self.instr_ids.shape[0])


_QUOTED_RE = re.compile(r"\"[^\"]*\"|'[^']*'|“[^”]*”")


def _norm_words(text: str) -> list[str]:
    return [t.lower() for t, _, _ in split_words(text)]


def _find_words(hay: list[str], needle: list[str]) -> int:
    """Index of the first occurrence of the word sequence ``needle`` in ``hay``, or -1."""
    if not needle:
        return -1
    k = len(needle)
    for i in range(len(hay) - k + 1):
        if hay[i] == needle[0] and hay[i : i + k] == needle:
            return i
    return -1


def _keep_elements(elements: list[UIElement], limit: int, flags: bool = True) -> list[UIElement]:
    if len(elements) <= limit:
        return list(elements)
    ranked = sorted(
        range(len(elements)),
        key=lambda i: (
            flags and not (elements[i].clickable or elements[i].editable),
            not (elements[i].text or elements[i].value),
            i,
        ),
    )
    return [elements[i] for i in sorted(ranked[:limit])]


def tap_point(el: UIElement, screen_size: tuple[int, int]) -> tuple[float, float]:
    """Where the agent taps an element: its centre, normalised and clipped to the screen."""
    w, h = screen_size
    cx, cy = el.center
    return (min(max(cx / w, 0.0), 1.0), min(max(cy / h, 0.0), 1.0))


def tapped_elements(
    elements: list[UIElement],
    tap_points: list[tuple[float, float]],
    screen_size: tuple[int, int],
    x: float,
    y: float,
) -> tuple[list[int], bool, str]:
    """The elements a tap at normalised (x, y) lands on: those whose tap point it is (exact);
    else the smallest containing it, else the nearest (flagged inexact, with a note)."""
    if not elements:
        return [], False, "no element to tap"
    same = [
        i
        for i, (px, py) in enumerate(tap_points)
        if abs(px - x) <= _POINT_TOL and abs(py - y) <= _POINT_TOL
    ]
    if same:
        return same, True, ""
    w, h = screen_size
    px, py = x * w, y * h
    inside = [i for i, e in enumerate(elements) if e.contains(px, py)]
    if inside:
        return [min(inside, key=lambda i: elements[i].area)], False, "smallest element"

    def dist(i: int) -> float:
        left, top, right, bottom = elements[i].bbox
        return math.hypot(max(left - px, 0.0, px - right), max(top - py, 0.0, py - bottom))

    return [min(range(len(elements)), key=dist)], False, "nearest element"


def _typed_tokens(instruction: str, tokens, text: str) -> set[int]:
    """Indices of the tokens inside an occurrence of ``text`` in the instruction (any case)."""
    low, needle = instruction.lower(), text.strip().lower()
    hit: set[int] = set()
    if not needle:
        return hit
    start = low.find(needle)
    while start >= 0:
        end = start + len(needle)
        hit.update(i for i, (_, s, e) in enumerate(tokens) if start <= s and e <= end)
        start = low.find(needle, start + 1)
    return hit


def _typed_field(prev: list[Action], meta: ObsMeta, dom_flags: bool) -> int | None:
    """The kept element that typing would go into: the focused editable one (with DOM flags),
    else the editable element the last of the earlier actions `prev` tapped, else None."""
    if dom_flags:
        for i, el in enumerate(meta.elements):
            if el.focused and el.editable:
                return i
    last = prev[-1] if prev else None
    if (
        last is None
        or last.type is not ActionType.DUAL_POINT
        or last.touch is None
        or last.is_swipe
    ):
        return None
    hit, _, _ = tapped_elements(meta.elements, meta.tap_points, meta.screen_size, *last.touch)
    return next((i for i in hit if meta.elements[i].editable), None)


def _history_features(
    obs: Observation, prev: list[Action], tokens, meta: ObsMeta, types: tuple[ActionType, ...]
):
    """(per-token rows, per-element rows, global row) of the history features, from the
    episode's earlier actions `prev`; the global row's type columns are ``types``."""
    n_tok, n_el = len(tokens), len(meta.elements)
    tok_rows = [[0.0] * INSTR_HISTORY for _ in range(n_tok)]
    el_rows = [[0.0] * ELEM_HISTORY for _ in range(n_el)]
    taps = [0] * n_el
    n_typed = 0
    for k, a in enumerate(prev):
        last = k == len(prev) - 1
        if a.type is ActionType.TYPE:
            n_typed += 1
            for i in _typed_tokens(obs.instruction, tokens, a.text):
                tok_rows[i][1] = 1.0
                if last:
                    tok_rows[i][0] = 1.0
        elif a.type is ActionType.DUAL_POINT and a.touch is not None and not a.is_swipe:
            hit, _, _ = tapped_elements(meta.elements, meta.tap_points, meta.screen_size, *a.touch)
            for i in hit:
                taps[i] += 1
                if last:
                    el_rows[i][0] = 1.0
    for i, t in enumerate(taps):
        el_rows[i][1] = min(t, 3) / 3
    cols = HistoryColumns.of(types)
    glob = [0.0] * cols.width
    last_action = prev[-1] if prev else None
    if last_action is None:
        glob[cols.no_action] = 1.0
    elif last_action.type in types:  # another type: none of the type columns
        glob[cols.last_type.start + types.index(last_action.type)] = 1.0
    glob[cols.count] = min(len(prev), 10) / 10
    glob[cols.repeated] = float(len(prev) >= 2 and prev[-1] == prev[-2])
    glob[cols.typed] = min(n_typed, 3) / 3
    glob[cols.swiped] = float(last_action is not None and last_action.is_swipe)
    return tok_rows, el_rows, glob


def role_mentioned(role: str, instr_words: list[str]) -> bool:
    """True when an instruction word (3+ letters) is the role or a prefix of it."""
    r = role.lower()
    return len(r) >= 3 and any(len(w) >= 3 and r.startswith(w) for w in instr_words)


def _element_features(el: UIElement, obs: Observation, instr_words: list[str]) -> list[float]:
    w, h = obs.screen_size
    left, top, right, bottom = el.bbox
    nl, nt, nr, nb = left / w, top / h, right / w, bottom / h
    cx, cy = (nl + nr) / 2, (nt + nb) / 2
    text_words, value_words = _norm_words(el.text), _norm_words(el.value)
    pos = _find_words(instr_words, text_words)
    vpos = _find_words(instr_words, value_words)
    overlap = len(set(text_words) & set(instr_words))
    offscreen = not (0.0 <= cx <= 1.0 and 0.0 <= cy <= 1.0)
    box = [min(max(v, -1.0), 2.0) for v in (nl, nt, nr, nb, cx, cy, nr - nl, nb - nt)]
    return [
        *box,
        math.log1p(max(0.0, right - left) * max(0.0, bottom - top)) / 12.0,
        float(el.clickable),
        float(el.focused),
        float(el.editable),
        float(bool(text_words)),
        float(bool(value_words)),
        float(offscreen),
        float(pos >= 0),
        float(vpos >= 0),
        overlap / max(1, len(set(text_words))),
        overlap / max(1, len(set(instr_words))),
        (pos + 1) / (len(instr_words) + 1) if pos >= 0 else 0.0,
    ]


def _instr_features(obs: Observation, tokens, elements: list[UIElement]) -> list[list[float]]:
    text_words: set[str] = set()
    value_words: set[str] = set()
    for el in elements:
        text_words.update(_norm_words(el.text))
        value_words.update(_norm_words(el.value))
    quoted = [(m.start(), m.end()) for m in _QUOTED_RE.finditer(obs.instruction)]
    n = max(1, len(tokens))
    rows = []
    for i, (tok, start, end) in enumerate(tokens):
        low = tok.lower()
        rows.append(
            [
                float(low in text_words),
                float(low in value_words),
                float(tok.replace(".", "", 1).isdigit()),
                float(not tok[0].isalnum() and tok[0] != "_"),
                float(tok[0].isupper()),
                float(any(a < start and end < b for a, b in quoted)),
                i / n,
            ]
        )
    return rows


class Featurizer:
    """Turns observations into a `FeatureBatch` (see the module doc). ``types``: the classes of
    the type head, in order (the history row's last-action columns)."""

    def __init__(
        self,
        config: FeatureConfig | None = None,
        cache: bool = False,
        types: tuple[ActionType, ...] = AITW_TYPES,
    ) -> None:
        self.config = config or FeatureConfig()
        self.types = types
        self.instr_columns = InstrColumns.of(self.config)
        self.elem_columns = ElemColumns.of(self.config)
        self.tokenizer = HashTokenizer(self.config.buckets, 3, self.config.pieces_per_word)
        #: With ``cache``, per-observation rows are kept while the observation lives (learners
        #: featurize the same replay observations many times; acting never repeats one).
        self._cache: dict[int, tuple[weakref.ref, dict[str, Any]]] | None = {} if cache else None

    def enable_cache(self) -> None:
        """Keep each observation's row while it lives (for learners; see ``cache``)."""
        if self._cache is None:
            self._cache = {}

    def _row(self, obs: Observation) -> dict[str, Any]:
        if self._cache is None:
            return self._one(obs)
        key = id(obs)
        hit = self._cache.get(key)
        if hit is not None and hit[0]() is obs:
            return hit[1]
        row = self._one(obs)
        cache = self._cache
        self._cache[key] = (weakref.ref(obs, lambda _, k=key: cache.pop(k, None)), row)
        return row

    def __call__(self, observations: list[Observation]) -> FeatureBatch:
        return self.featurize(observations)

    def featurize(self, observations: list[Observation]) -> FeatureBatch:
        cfg = self.config
        if not observations:
            raise ValueError("featurize needs at least one observation")
        rows = [self._row(o) for o in observations]
        b = len(rows)
        li = max(1, max(len(r["tok_ids"]) for r in rows))
        le = max(1, max(len(r["el_ids"]) for r in rows))
        instr_ids = np.zeros((b, li, cfg.pieces_per_word), np.int64)
        instr_feats = np.zeros((b, li, cfg.instr_features), np.float32)
        instr_mask = np.zeros((b, li), bool)
        elem_ids = np.zeros((b, le, cfg.max_elem_ids), np.int64)
        elem_role = np.zeros((b, le), np.int64)
        elem_feats = np.zeros((b, le, cfg.elem_features), np.float32)
        elem_mask = np.zeros((b, le), bool)
        for i, r in enumerate(rows):
            for j, ids in enumerate(r["tok_ids"]):
                instr_ids[i, j, : len(ids)] = ids
            n = len(r["tok_ids"])
            if n:
                instr_feats[i, :n] = r["tok_feats"]
                instr_mask[i, :n] = True
            for j, ids in enumerate(r["el_ids"]):
                elem_ids[i, j, : len(ids)] = ids
            m = len(r["el_ids"])
            if m:
                elem_role[i, :m] = r["roles"]
                elem_feats[i, :m] = r["el_feats"]
                elem_mask[i, :m] = True
        ic, ec = self.instr_columns, self.elem_columns
        if not cfg.overlap_features:
            instr_feats[:, :, ic.overlap] = 0.0
            elem_feats[:, :, ec.overlap] = 0.0
        if cfg.instr_positions != "absolute":
            instr_feats[:, :, ic.position] = 0.0
        if not cfg.dom_flags:
            elem_feats[:, :, ec.dom_flags] = 0.0
        batch = FeatureBatch(
            torch.from_numpy(instr_ids),
            torch.from_numpy(instr_feats),
            torch.from_numpy(instr_mask),
            torch.from_numpy(elem_ids),
            torch.from_numpy(elem_role),
            torch.from_numpy(elem_feats),
            torch.from_numpy(elem_mask),
            self._screenshots(observations),
            [r["meta"] for r in rows],
            torch.tensor([r["history"] for r in rows], dtype=torch.float32)
            if cfg.history
            else None,
        )
        if cfg.pixels:
            batch.pixels, batch.elem_pool = self._pixels(observations, rows, le)
        if cfg.elem_words:
            batch.elem_word_ids, batch.elem_word_mask = self._elem_words(rows, le)
        return batch

    def _pixels(self, observations: list[Observation], rows, le: int):
        """The downscaled screenshots and each element's pooling weights over the CNN's output
        cells: the cells whose centre lies inside its box, else the cell under its centre."""
        from PIL import Image

        w, h = self.config.pixel_size
        fw, fh = w // PIXEL_STRIDE, h // PIXEL_STRIDE
        img = np.zeros((len(observations), 3, h, w), np.float32)
        pool = np.zeros((len(observations), le, fh * fw), np.float32)
        cx = (np.arange(fw) + 0.5) / fw
        cy = (np.arange(fh) + 0.5) / fh
        for i, (o, r) in enumerate(zip(observations, rows)):
            if o.screenshot is not None:
                im = Image.fromarray(np.ascontiguousarray(o.screenshot)).resize((w, h))
                img[i] = np.asarray(im, np.float32).transpose(2, 0, 1) / 255.0
            sw, sh = r["meta"].screen_size
            for j, el in enumerate(r["meta"].elements):
                left, top, right, bottom = el.bbox
                mx = (cx >= left / sw) & (cx <= right / sw)
                my = (cy >= top / sh) & (cy <= bottom / sh)
                cells = np.outer(my, mx).reshape(-1).astype(np.float32)
                if not cells.any():
                    px, py = tap_point(el, (sw, sh))
                    cells[min(int(py * fh), fh - 1) * fw + min(int(px * fw), fw - 1)] = 1.0
                pool[i, j] = cells / cells.sum()
        return torch.from_numpy(img), torch.from_numpy(pool)

    def _elem_words(self, rows, le: int):
        cfg = self.config
        ids = np.zeros((len(rows), le, cfg.elem_words, cfg.pieces_per_word), np.int64)
        mask = np.zeros((len(rows), le, cfg.elem_words), bool)
        for i, r in enumerate(rows):
            for j, words in enumerate(r["el_word_ids"]):
                for k, w in enumerate(words):
                    ids[i, j, k, : len(w)] = w
                    mask[i, j, k] = True
        return torch.from_numpy(ids), torch.from_numpy(mask)

    def _one(self, obs: Observation) -> dict[str, Any]:
        cfg, tok = self.config, self.tokenizer
        tokens = split_words(obs.instruction)[: cfg.max_instr_tokens]
        elements = _keep_elements(obs.elements, cfg.max_elements, cfg.dom_flags)
        instr_words = [t.lower() for t, _, _ in tokens]
        labels = field_labels(elements) if cfg.field_labels else []
        el_ids = []
        for j, el in enumerate(elements):
            ids = tok.text_ids(el.text, cfg.max_elem_ids)
            if labels and labels[j]:  # a text field is known by its label's words
                ids += tok.text_ids(" ".join(labels[j]), cfg.max_elem_ids - len(ids))
            ids += tok.text_ids(el.value, cfg.max_elem_ids - len(ids), namespace="v:")
            el_ids.append(ids or [stable_hash("<empty>", cfg.buckets)])
        meta = ObsMeta(
            obs.instruction,
            [(s, e) for _, s, e in tokens],
            elements,
            [tap_point(el, obs.screen_size) for el in elements],
            obs.screen_size,
        )
        row = {
            "tok_ids": [tok.word_ids(t) for t, _, _ in tokens],
            "tok_feats": _instr_features(obs, tokens, elements),
            "el_ids": el_ids,
            "roles": [stable_hash(el.role.lower(), ROLE_BUCKETS) for el in elements],
            "el_feats": [_element_features(el, obs, instr_words) for el in elements],
            "meta": meta,
        }
        if cfg.elem_words:
            words = [split_words(el.text)[: cfg.elem_words] for el in elements]
            meta.elem_words = [[(a, b) for _, a, b in ws] for ws in words]
            row["el_word_ids"] = [[tok.word_ids(t) for t, _, _ in ws] for ws in words]
        if cfg.role_mention:
            row["el_feats"] = [
                [*f, float(role_mentioned(el.role, instr_words))]
                for f, el in zip(row["el_feats"], elements)
            ]
        prev = list(obs.previous_actions) if cfg.history or cfg.field_labels else []
        if cfg.history:
            tok_h, el_h, row["history"] = _history_features(obs, prev, tokens, meta, self.types)
            row["tok_feats"] = [a + b for a, b in zip(row["tok_feats"], tok_h)]
            row["el_feats"] = [a + b for a, b in zip(row["el_feats"], el_h)]
        if cfg.field_labels:
            target = _typed_field(prev, meta, cfg.dom_flags)
            tok_f = token_rows(labels, instr_words, target)
            row["tok_feats"] = [a + b for a, b in zip(row["tok_feats"], tok_f)]
            el_f = element_rows(labels, instr_words)
            row["el_feats"] = [a + b for a, b in zip(row["el_feats"], el_f)]
        return row

    def _screenshots(self, observations: list[Observation]) -> torch.Tensor | None:
        size = self.config.screenshot_size
        if size is None:
            return None
        from PIL import Image

        w, h = size
        out = np.zeros((len(observations), 3, h, w), np.float32)
        for i, o in enumerate(observations):
            if o.screenshot is not None:
                img = Image.fromarray(np.ascontiguousarray(o.screenshot)).resize((w, h))
                out[i] = np.asarray(img, np.float32).transpose(2, 0, 1) / 255.0
        return torch.from_numpy(out)


def featurize(observations: list[Observation], config: FeatureConfig | None = None):
    """One-off featurisation (build a `Featurizer` once to reuse its token cache)."""
    return Featurizer(config)(observations)
