"""Where each feature sits in the featurizer's rows: named columns, laid out from the settings.

A row (per instruction token, per element, and the episode's global history row) is a fixed
sequence of features, the optional ones appended in a fixed order when on (history, then field
labels). The featurizer writes its rows in that order; everything that reads or blanks a
feature (the span pointers read "inside quotes", ``overlap_features=False`` blanks the overlap
columns, the history row's last-action type follows the type head's classes) asks these layouts
for it by name. Torch-free: the config reads the widths from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: Width of the history columns (per token: typed by the last action, by an earlier one; per
#: element: tapped by the last action, how often tapped) and of the field-label columns (per
#: token: after the typed field's label, after another's; per element: its label is in the
#: instruction, where).
INSTR_HISTORY, ELEM_HISTORY = 2, 2
INSTR_FIELD, ELEM_FIELD = 2, 2


class _Cursor:
    """Hands out consecutive columns."""

    def __init__(self) -> None:
        self.at = 0

    def one(self) -> int:
        self.at += 1
        return self.at - 1

    def group(self, n: int) -> slice:
        self.at += n
        return slice(self.at - n, self.at)


@dataclass(frozen=True)
class InstrColumns:
    """The columns of an instruction token's row."""

    overlap: slice  #: the word occurs in an element's text, in an element's value
    number: int
    punctuation: int
    capitalised: int
    quoted: int  #: inside a quoted phrase of the instruction
    position: int  #: relative position in the instruction
    history: slice | None  #: typed by the last action, by an earlier one
    field: slice | None  #: follows the typed field's label, another field's
    width: int

    @classmethod
    def of(cls, features: Any) -> InstrColumns:
        """The layout for a `FeatureConfig` (``history``, ``field_labels``)."""
        c = _Cursor()
        return cls(
            overlap=c.group(2),
            number=c.one(),
            punctuation=c.one(),
            capitalised=c.one(),
            quoted=c.one(),
            position=c.one(),
            history=c.group(INSTR_HISTORY) if features.history else None,
            field=c.group(INSTR_FIELD) if features.field_labels else None,
            width=c.at,
        )


@dataclass(frozen=True)
class ElemColumns:
    """The columns of an element's row."""

    box: slice  #: left, top, right, bottom, centre x and y, width, height (normalised)
    area: int
    dom_flags: slice  #: clickable, focused, editable
    has_text: int
    has_value: int
    offscreen: int
    #: its text / value occurs in the instruction, word overlap both ways, where it matches
    overlap: slice
    role_mention: int | None  #: the instruction names its kind
    history: slice | None  #: tapped by the last action, how often tapped
    field: slice | None  #: its field label occurs in the instruction, where
    width: int

    @classmethod
    def of(cls, features: Any) -> ElemColumns:
        """The layout for a `FeatureConfig` (``role_mention``, ``history``, ``field_labels``)."""
        c = _Cursor()
        return cls(
            box=c.group(8),
            area=c.one(),
            dom_flags=c.group(3),
            has_text=c.one(),
            has_value=c.one(),
            offscreen=c.one(),
            overlap=c.group(5),
            role_mention=c.one() if features.role_mention else None,
            history=c.group(ELEM_HISTORY) if features.history else None,
            field=c.group(ELEM_FIELD) if features.field_labels else None,
            width=c.at,
        )


@dataclass(frozen=True)
class HistoryColumns:
    """The columns of the episode's global history row."""

    last_type: slice  #: the last action's type, one column per class of the type head
    no_action: int  #: no action yet
    count: int  #: actions so far (capped)
    repeated: int  #: the last action repeated the one before
    typed: int  #: TYPE actions so far (capped)
    swiped: int  #: the last action was a swipe
    width: int

    @classmethod
    def of(cls, types: Sequence[Any]) -> HistoryColumns:
        """The layout for the type head's classes ``types``."""
        c = _Cursor()
        return cls(
            last_type=c.group(len(types)),
            no_action=c.one(),
            count=c.one(),
            repeated=c.one(),
            typed=c.one(),
            swiped=c.one(),
            width=c.at,
        )
