"""UI elements as ADP image annotations and back, and the fields an annotation cannot carry.

An annotation holds ``element_type`` (our ``role``), ``bounding_box`` (x, y, width, height in
screenshot pixels; our ``bbox`` is left, top, right, bottom), ``text``, ``content_description``
(an Android element's ``attrs["content_desc"]``), ``clickable`` and ``editable``. What it has no
field for (the element's ``id``, ``value``, ``focused``, the other ``attrs``, and a box whose
right or bottom edge ``x + width`` does not give back bit for bit) is the element's *fix*: the
fields that differ between the element and what its annotation reads back as, kept in the
trajectory's details so a round trip is exact. A screen without a screenshot has no annotation
to carry its elements: they go whole into the details (`element_record`).

ADP's AitW conversion writes boxes normalised to [0, 1]; AndroidControl's in pixels. When every
box of a screenshot that is larger than one pixel lies inside [0, 1], the boxes are read as
normalised and scaled to the screenshot.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, fields
from typing import Any

from devicerl.records import UIElement

#: The largest box coordinate (pixels) an annotation or element record may carry.
MAX_BOX = 1e7
#: The most elements one screen may carry.
MAX_ELEMENTS = 10_000
#: The Android attribute that ADP's ``content_description`` stands for.
DESCRIPTION_ATTR = "content_desc"

_FIELDS = tuple(f.name for f in fields(UIElement))


def annotation(el: UIElement) -> dict[str, Any]:
    """``el`` as an ADP image annotation."""
    left, top, right, bottom = el.bbox
    description = el.attrs.get(DESCRIPTION_ATTR)
    return {
        "element_type": el.role,
        "bounding_box": {"x": left, "y": top, "width": right - left, "height": bottom - top},
        "text": el.text,
        "content_description": description
        if isinstance(description, str) and description
        else None,
        "clickable": el.clickable,
        "editable": el.editable,
    }


def from_annotation(ann: Mapping[str, Any], index: int, scale: tuple[float, float]) -> UIElement:
    """The element an annotation (checked by `check_annotation`) stands for; ``scale``
    multiplies its box (normalised boxes)."""
    box = ann["bounding_box"]
    sx, sy = scale
    x, y, w, h = (float(box[k]) for k in ("x", "y", "width", "height"))
    if scale != (1.0, 1.0):
        x, y, w, h = x * sx, y * sy, w * sx, h * sy
    description = ann.get("content_description")
    return UIElement(
        id=str(index),
        role=ann["element_type"],
        text=ann.get("text") or "",
        bbox=(x, y, x + w, y + h),
        clickable=bool(ann.get("clickable")),
        editable=bool(ann.get("editable")),
        attrs={DESCRIPTION_ATTR: description} if description else {},
    )


def check_annotation(ann: Any, where: str) -> Mapping[str, Any]:
    """``ann`` when it is an annotation ADP's schema accepts (with finite, bounded numbers),
    else `ValueError` naming the field."""
    if not isinstance(ann, Mapping):
        raise ValueError(f"{where} is {type(ann).__name__}, not an object")
    if not isinstance(ann.get("element_type"), str):
        raise ValueError(f"{where}.element_type is missing or not text")
    box = ann.get("bounding_box")
    if not isinstance(box, Mapping):
        raise ValueError(f"{where}.bounding_box is missing or not an object")
    for k in ("x", "y", "width", "height"):
        _box_number(box.get(k), f"{where}.bounding_box.{k}")
    for k in ("text", "content_description"):
        if ann.get(k) is not None and not isinstance(ann[k], str):
            raise ValueError(f"{where}.{k} is {type(ann[k]).__name__}, not text")
    for k in ("clickable", "editable"):
        if ann.get(k) is not None and not isinstance(ann[k], bool):
            raise ValueError(f"{where}.{k} is {type(ann[k]).__name__}, not true or false")
    return ann


def _box_number(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"{where} is {type(v).__name__}, not a number")
    if not (math.isfinite(v) and abs(v) <= MAX_BOX):
        raise ValueError(f"{where} {v!r} is not a finite number within {MAX_BOX:g}")
    return float(v)


def box_scale(
    annotations: Sequence[Mapping[str, Any]], size: tuple[int, int]
) -> tuple[float, float]:
    """(1, 1) for pixel boxes; the screenshot's size for boxes that are all normalised."""
    w, h = size
    if not annotations or w <= 1 or h <= 1:
        return (1.0, 1.0)
    for a in annotations:
        b = a["bounding_box"]
        x, y = float(b["x"]), float(b["y"])
        if not (0 <= x <= 1 and 0 <= y <= 1 and x + b["width"] <= 1 and y + b["height"] <= 1):
            return (1.0, 1.0)
    return (float(w), float(h))


# -- what annotations cannot carry ------------------------------------------------------------
def element_record(el: UIElement) -> dict[str, Any]:
    """Every field of ``el`` as JSON values."""
    d = asdict(el)
    d["bbox"] = list(el.bbox)
    return d


def fixes(elements: Sequence[UIElement]) -> list[dict[str, Any]] | None:
    """Per element, the fields its annotation does not give back exactly (None: none)."""
    out = []
    for i, el in enumerate(elements):
        back = element_record(from_annotation(annotation(el), i, (1.0, 1.0)))
        full = element_record(el)
        out.append({k: v for k, v in full.items() if back[k] != v})
    return out if any(out) else None


def apply_fixes(elements: list[UIElement], fixes_: Any, where: str) -> list[UIElement]:
    """``elements`` with their fixes (from the details) applied; fixes that do not line up
    with the annotations are a `ValueError`."""
    if not isinstance(fixes_, list) or len(fixes_) != len(elements):
        raise ValueError(f"{where}: element fixes do not line up with the annotations")
    out = []
    for i, (el, fix) in enumerate(zip(elements, fixes_)):
        merged = {**element_record(el), **_mapping(fix, f"{where}[{i}]")}
        out.append(element_from_record(merged, f"{where}[{i}]"))
    return out


def elements_from_records(records: Any, where: str) -> list[UIElement]:
    if not isinstance(records, list):
        raise ValueError(f"{where} is {type(records).__name__}, not a list")
    if len(records) > MAX_ELEMENTS:
        raise ValueError(f"{where} holds {len(records)} elements, more than {MAX_ELEMENTS}")
    return [element_from_record(_mapping(r, f"{where}[{i}]"), f"{where}[{i}]")
            for i, r in enumerate(records)]  # fmt: skip


def element_from_record(d: Mapping[str, Any], where: str) -> UIElement:
    """A `UIElement` from its `element_record`, every field checked."""
    unknown = set(d) - set(_FIELDS)
    if unknown:
        raise ValueError(f"{where}: unknown element field {sorted(unknown)[0]!r}")
    for k in ("id", "role", "text", "value"):
        if not isinstance(d.get(k, ""), str):
            raise ValueError(f"{where}.{k} is {type(d[k]).__name__}, not text")
    for k in ("clickable", "focused", "editable"):
        if not isinstance(d.get(k, False), bool):
            raise ValueError(f"{where}.{k} is {type(d[k]).__name__}, not true or false")
    bbox = d.get("bbox", [0.0, 0.0, 0.0, 0.0])
    if not isinstance(bbox, list) or len(bbox) != 4:
        raise ValueError(f"{where}.bbox is not a list of four numbers")
    box = tuple(_box_number(v, f"{where}.bbox[{i}]") for i, v in enumerate(bbox))
    return UIElement(
        id=d.get("id", ""),
        role=d.get("role", ""),
        text=d.get("text", ""),
        value=d.get("value", ""),
        bbox=box,  # type: ignore[arg-type]
        clickable=d.get("clickable", False),
        focused=d.get("focused", False),
        editable=d.get("editable", False),
        attrs=dict(_mapping(d.get("attrs", {}), f"{where}.attrs")),
    )


def _mapping(v: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise ValueError(f"{where} is {type(v).__name__}, not an object")
    return v
