"""Parquet columns derived from a record dataclass's fields: each field declared once, in
`devicerl.records`, becomes its column(s), its writer and its reader here.

A field's annotation picks its column: ``str``/``int``/``float``/``bool`` the Arrow scalar
(``int`` as int64), an `Enum` its value, a type with ``to_json``/``from_json`` (an `Action`)
that text, a ``dict`` (free-form) JSON text (`devicerl.data.codec.dumps_json`, arrays kept
exactly), a nested dataclass one column per field under ``<column>_`` (an `EpisodePlan`: its
columns are all null when it is None), a list of dataclasses a list of structs (`UIElement`s), a
tuple of numbers a list. Field metadata says what the annotation cannot:

- ``{"column": "obs_step"}``: the column's name (default: the field's);
- ``{"column_type": "int32"}``: a narrower Arrow type than the annotation's;
- ``{"columns": ("screen_width", "screen_height")}``: a fixed tuple spread over columns;
- ``{"store": "json"}``: a nested dataclass as one JSON column (a `Judgement`), with
  ``{"retired": (...)}`` naming keys older versions wrote that are read past;
- ``{"store": False}``: not stored (``previous_actions``, filled in while acting).

Reading: a null cell, or a column the shard lacks (an older version had no such field), reads as
the field's default; a field that may be None reads as None. Arrays (screenshots) are the
store's own business (`devicerl.data.schema`): `record_fields` leaves them out.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from dataclasses import MISSING, asdict
from typing import Any, get_args, get_origin

import numpy as np
import pyarrow as pa

from devicerl.data.codec import dumps_json, loads_json

_SCALARS: dict[type, tuple[pa.DataType, Callable[[Any], Any]]] = {
    str: (pa.string(), str),
    int: (pa.int64(), int),
    float: (pa.float64(), float),
    bool: (pa.bool_(), bool),
}


@dataclasses.dataclass(frozen=True)
class FieldColumns:
    """One record field's columns: ``write(value, row)`` fills them in, ``read(row)`` gives the
    value back. ``required``: a shard must have them (the field has no default)."""

    name: str
    columns: tuple[pa.Field, ...]
    write: Callable[[Any, dict[str, Any]], None]
    read: Callable[[dict[str, Any]], Any]
    required: bool


def _unwrap(tp: Any) -> tuple[Any, bool]:
    """(type, may be None) of an annotation such as ``int | None``."""
    if get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        return (args[0] if len(args) == 1 else Any), len(args) < len(get_args(tp))
    return tp, False


def _default(f: dataclasses.Field) -> Any:
    if f.default_factory is not MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return f.default


def _cell_codec(tp: Any, meta: dict[str, Any]) -> tuple[pa.DataType, Callable, Callable]:
    """(Arrow type, value -> cell, cell -> value) of a one-column field of type ``tp``."""
    origin = get_origin(tp)
    if meta.get("store") == "json" and dataclasses.is_dataclass(tp):
        retired = tuple(meta.get("retired", ()))

        def read(cell: str) -> Any:
            data = loads_json(cell)
            return tp(**{k: v for k, v in data.items() if k not in retired})

        return pa.string(), lambda v: dumps_json(asdict(v)), read
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return pa.string(), lambda v: v.value, tp
    if isinstance(tp, type) and hasattr(tp, "to_json") and hasattr(tp, "from_json"):
        return pa.string(), lambda v: v.to_json(), tp.from_json
    if tp is Any or tp is dict or origin is dict:
        return pa.string(), dumps_json, loads_json
    if origin is tuple:
        item, convert = _SCALARS[get_args(tp)[0]]
        return pa.list_(item), lambda v: [convert(x) for x in v], tuple
    if origin is list and dataclasses.is_dataclass(get_args(tp)[0]):
        return _struct_list(get_args(tp)[0])
    arrow, convert = _SCALARS[tp]
    if "column_type" in meta:
        arrow = pa.type_for_alias(meta["column_type"])
    return arrow, convert, lambda c: c


def _struct_list(cls: type) -> tuple[pa.DataType, Callable, Callable]:
    """A list of ``cls`` records as a list of structs of their fields' cells."""
    parts = record_fields(cls)
    struct = pa.struct([c for p in parts for c in p.columns])

    def write(items: list[Any]) -> list[dict[str, Any]]:
        rows = []
        for item in items:
            row: dict[str, Any] = {}
            for p in parts:
                p.write(getattr(item, p.name), row)
            rows.append(row)
        return rows

    def read(cells: list[dict[str, Any]] | None) -> list[Any]:
        return [cls(**{p.name: p.read(cell) for p in parts}) for cell in cells or ()]

    return pa.list_(struct), write, read


def _has_default(f: dataclasses.Field) -> bool:
    return f.default is not MISSING or f.default_factory is not MISSING  # type: ignore[misc]


def _one_column(f: dataclasses.Field, column: str, tp: Any, optional: bool) -> FieldColumns:
    arrow, encode, decode = _cell_codec(tp, dict(f.metadata))
    fallback = None if optional else _default(f)

    def write(value: Any, row: dict[str, Any]) -> None:
        row[column] = None if value is None else encode(value)

    def read(row: dict[str, Any]) -> Any:
        cell = row.get(column)
        value = None if cell is None else decode(cell)
        return fallback if value is None and not optional else value

    return FieldColumns(f.name, (pa.field(column, arrow),), write, read, not _has_default(f))


def _spread(f: dataclasses.Field, prefix: str, tp: Any) -> FieldColumns:
    """A fixed tuple (``screen_size``) over the columns its metadata names."""
    names = tuple(prefix + n for n in f.metadata["columns"])
    arrow, convert = _SCALARS[get_args(tp)[0]]
    if "column_type" in f.metadata:
        arrow = pa.type_for_alias(f.metadata["column_type"])

    def write(value: Any, row: dict[str, Any]) -> None:
        row.update({n: convert(v) for n, v in zip(names, value)})

    def read(row: dict[str, Any]) -> Any:
        return tuple(row.get(n) for n in names)

    columns = tuple(pa.field(n, arrow) for n in names)
    return FieldColumns(f.name, columns, write, read, not _has_default(f))


def _nested(f: dataclasses.Field, column: str, tp: type, optional: bool) -> FieldColumns:
    """A nested dataclass (``plan``) as its own fields' columns under ``<column>_``."""
    parts = record_fields(tp, prefix=column + "_")

    def write(value: Any, row: dict[str, Any]) -> None:
        if value is not None:
            for p in parts:
                p.write(getattr(value, p.name), row)

    def read(row: dict[str, Any]) -> Any:
        if all(row.get(c.name) is None for p in parts for c in p.columns):
            return None if optional else _default(f)
        return tp(**{p.name: p.read(row) for p in parts})

    columns = tuple(c for p in parts for c in p.columns)
    return FieldColumns(f.name, columns, write, read, not _has_default(f))


def _flattened(tp: Any, meta: Any) -> bool:
    """A nested dataclass spreads over columns unless it is JSON (its metadata, or its own
    ``to_json``)."""
    own_json = hasattr(tp, "to_json") and hasattr(tp, "from_json")
    return dataclasses.is_dataclass(tp) and meta.get("store") != "json" and not own_json


def field_columns(f: dataclasses.Field, hint: Any, prefix: str = "") -> FieldColumns | None:
    """The columns of record field ``f`` (annotation ``hint``), their names after ``prefix``;
    None when the field is not stored."""
    if f.metadata.get("store") is False:
        return None
    tp, optional = _unwrap(hint)
    column = prefix + f.metadata.get("column", f.name)
    if "columns" in f.metadata:
        return _spread(f, prefix, tp)
    if _flattened(tp, f.metadata):
        return _nested(f, column, tp, optional)  # type: ignore[arg-type]
    return _one_column(f, column, tp, optional)


def record_fields(cls: type, prefix: str = "", skip: tuple[str, ...] = ()) -> list[FieldColumns]:
    """The stored fields of dataclass ``cls`` (not those in ``skip``, nor arrays), in order."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        tp = _unwrap(hints[f.name])[0]
        if f.name in skip or (isinstance(tp, type) and issubclass(tp, np.ndarray)):
            continue
        columns = field_columns(f, hints[f.name], prefix)
        if columns is not None:
            out.append(columns)
    return out
