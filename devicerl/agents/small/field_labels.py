"""Which words name each text field, and which instruction words belong to the field typed into.

A form's text boxes usually carry no text of their own: what says "this box is the username" is
a label drawn beside or above it (MiniWoB++ login-user: a "Username" label, then an empty
input), or a placeholder / ARIA label. With two quoted values in the instruction ('Enter the
username "kanesha" and the password "x7"'), nothing in the box itself says which value goes
where. This module gives each editable element a *field label* and marks the instruction tokens
that follow a mention of the label of the field being typed into, so the small agent's typing
pointers can learn "type what the instruction says after this field's name".

Everything here reads the screen as a user sees it (element boxes and texts); the placeholder
and ARIA label come from the element's attributes when the device gives them.
"""

from __future__ import annotations

from devicerl.agents.small.columns import INSTR_FIELD
from devicerl.agents.small.tokenize import split_words
from devicerl.records import UIElement

#: Tokens after a label mention that count as "following" it.
WINDOW = 4
#: A label farther than this many of the field's heights from it is not its label.
MAX_GAP = 1.5
#: Texts longer than this many words are not labels.
MAX_LABEL_WORDS = 4


def _words(text: str) -> list[str]:
    return [t.lower() for t, _, _ in split_words(text) if t[0].isalnum()]


def _gap(label: UIElement, field: UIElement) -> float | None:
    """Distance from `label` to `field` when the label is left of it on the same row or above
    it in the same column, else None."""
    fl, ft, fr, fb = field.bbox
    ll, lt, lr, lb = label.bbox
    if lr <= fl + 2 and min(lb, fb) - max(lt, ft) > 0:  # left, overlapping rows
        return fl - lr
    if lb <= ft + 2 and min(lr, fr) - max(ll, fl) > 0:  # above, overlapping columns
        return ft - lb
    return None


def field_labels(elements: list[UIElement]) -> list[list[str]]:
    """Per element, the lower-cased words naming it as a text field (empty for elements that are
    not editable or have text of their own): its placeholder or ARIA label, else the nearest
    short text left of it or above it (within ``MAX_GAP`` of its height)."""
    out: list[list[str]] = []
    for field in elements:
        if not field.editable or field.text.strip():
            out.append([])
            continue
        named = field.attrs.get("aria-label") or field.attrs.get("placeholder")
        if named:
            out.append(_words(str(named)))
            continue
        height = max(1.0, field.bbox[3] - field.bbox[1])
        best: tuple[float, list[str]] | None = None
        for other in elements:
            words = _words(other.text)
            if other is field or other.editable or not 0 < len(words) <= MAX_LABEL_WORDS:
                continue
            gap = _gap(other, field)
            if gap is not None and gap <= MAX_GAP * height and (best is None or gap < best[0]):
                best = (gap, words)
        out.append(best[1] if best else [])
    return out


def _alike(a: str, b: str) -> bool:
    return a == b or (len(a) >= 5 and len(b) >= 5 and a[:5] == b[:5])


def mentions(instr_words: list[str], label: list[str]) -> list[int]:
    """Indices of the instruction words that end a mention of `label`: its whole word
    sequence; else any of its words of 4+ letters, or a word sharing their first five letters
    ("directed" for "Director", "password" for "Verify password")."""
    if not label:
        return []
    k = len(label)
    hits = [i + k - 1 for i in range(len(instr_words) - k + 1) if instr_words[i : i + k] == label]
    if hits:
        return hits
    keys = [w for w in label if len(w) >= 4]
    return [i for i, w in enumerate(instr_words) if any(_alike(w, key) for key in keys)]


def element_rows(labels: list[list[str]], instr_words: list[str]) -> list[list[float]]:
    """Per element, its ``ELEM_FIELD`` columns: the label occurs in the instruction, and where
    (relative position of the mention's last word)."""
    rows = []
    n = len(instr_words) + 1
    for label in labels:
        at = mentions(instr_words, label)
        rows.append([float(bool(at)), (at[0] + 1) / n if at else 0.0])
    return rows


def token_rows(
    labels: list[list[str]], instr_words: list[str], target: int | None
) -> list[list[float]]:
    """Per instruction token, its ``INSTR_FIELD`` columns: it lies within ``WINDOW`` tokens
    after a mention of the label of field `target` (the one typed into), or of another field."""
    rows = [[0.0] * INSTR_FIELD for _ in instr_words]
    for e, label in enumerate(labels):
        col = 0 if e == target else 1
        for end in mentions(instr_words, label):
            for i in range(end + 1, min(end + 1 + WINDOW, len(instr_words))):
                rows[i][col] = 1.0
    return rows
