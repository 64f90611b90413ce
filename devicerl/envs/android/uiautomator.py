"""``uiautomator dump`` XML as `UIElement`s.

Each ``<node>`` carries ``bounds="[left,top][right,bottom]"`` in device pixels, ``text``,
``content-desc``, ``resource-id``, ``class`` and boolean attributes (``clickable``, ``focused``,
``scrollable``, ``visible-to-user`` on newer dumps...). Kept: nodes that are visible (not marked
invisible, non-empty after clipping to the screen) and that carry something an agent can read
or use (text, a description, or an interaction flag); bare layout containers are dropped. Boxes
are scaled to screenshot pixels. Ids are ``n0, n1, ...`` in document order of the kept nodes.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from devicerl.errors import DataError
from devicerl.records import UIElement

_BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")
_FLAGS = ("checkable", "checked", "enabled", "scrollable", "selected", "password")
#: Class-name suffixes -> roles (first match wins; the browser backend uses the same names).
_ROLES = (
    ("EditText", "textbox"),
    ("AutoCompleteTextView", "textbox"),
    ("SearchAutoComplete", "textbox"),
    ("CheckBox", "checkbox"),
    ("RadioButton", "radio"),
    ("Switch", "switch"),
    ("ToggleButton", "switch"),
    ("ImageButton", "button"),
    ("Button", "button"),
    ("SeekBar", "slider"),
    ("RatingBar", "slider"),
    ("ProgressBar", "progressbar"),
    ("Spinner", "combobox"),
    ("TabWidget", "tablist"),
    ("WebView", "webview"),
    ("ImageView", "image"),
    ("TextView", "text"),
    ("RecyclerView", "list"),
    ("ListView", "list"),
    ("GridView", "list"),
    ("ScrollView", "list"),
    ("ViewPager", "list"),
)
_EDITABLE = ("EditText", "AutoCompleteTextView", "SearchAutoComplete")


def role_of(cls: str) -> str:
    """A role from an Android class name (``android.widget.Button`` -> ``button``)."""
    short = cls.rsplit(".", 1)[-1]
    for suffix, role in _ROLES:
        if short.endswith(suffix):
            return role
    return "group" if short.endswith("Layout") or short.endswith("ViewGroup") else "view"


def _bounds(value: str) -> tuple[int, int, int, int] | None:
    m = _BOUNDS.fullmatch(value.strip())
    return tuple(int(v) for v in m.groups()) if m else None  # type: ignore[return-value]


def hierarchy_rotation(xml: str | bytes) -> int:
    """The display rotation the dump reports (0-3; 0 when absent)."""
    m = re.search(
        rb'<hierarchy[^>]*rotation="(\d)"', xml if isinstance(xml, bytes) else xml.encode()
    )
    return int(m.group(1)) if m else 0


def parse_hierarchy(
    xml: str | bytes, screen: tuple[int, int], scale: float = 1.0
) -> list[UIElement]:
    """Visible, meaningful nodes of a dump; ``screen`` is the device's (width, height) in
    pixels, ``scale`` maps device pixels to screenshot pixels. Raises `DataError` on XML that
    does not parse (text before the XML, e.g. a "dumped to" line, is skipped)."""
    raw = xml.encode("utf-8") if isinstance(xml, str) else xml
    start = raw.find(b"<?xml")
    start = raw.find(b"<hierarchy") if start < 0 else start
    try:
        root = ET.fromstring(raw[max(start, 0) :])
    except ET.ParseError as e:
        raise DataError(f"uiautomator dump is not valid XML ({e})") from None
    width, height = screen
    out: list[UIElement] = []
    for node in root.iter("node"):
        a = node.attrib
        box = _bounds(a.get("bounds", ""))
        if box is None or a.get("visible-to-user", "true") != "true":
            continue
        left, top = max(box[0], 0), max(box[1], 0)
        right, bottom = min(box[2], width), min(box[3], height)
        if right <= left or bottom <= top:
            continue
        cls = a.get("class", "")
        desc = a.get("content-desc", "")
        editable = any(cls.endswith(s) for s in _EDITABLE)
        clickable = a.get("clickable") == "true" or a.get("long-clickable") == "true"
        focused = a.get("focused") == "true"
        flags = {k: a.get(k) == "true" for k in _FLAGS}
        text = a.get("text", "")
        if not (text or desc or clickable or editable or focused or flags["scrollable"]) and (
            not flags["checkable"]
        ):
            continue
        attrs = {
            "class": cls,
            "resource_id": a.get("resource-id", ""),
            "content_desc": desc,
            "package": a.get("package", ""),
            **flags,
        }
        out.append(
            UIElement(
                id=f"n{len(out)}",
                role=role_of(cls),
                text=text or desc,
                value=text if editable else "",
                bbox=(left * scale, top * scale, right * scale, bottom * scale),
                clickable=clickable,
                focused=focused,
                editable=editable,
                attrs=attrs,
            )
        )
    return out
