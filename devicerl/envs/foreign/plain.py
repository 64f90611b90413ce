"""Plain data <-> devicerl records, for what crosses to and from a foreign device.

The foreign side sends observations and task verdicts as JSON objects (schema in
`devicerl.envs.foreign.remote`); here they become `Observation`, `UIElement` and `TaskStatus`,
checked field by field: a foreign device is another program, so what it sends is read like a
file (unknown fields, wrong types, screenshots that are not H x W x 3 uint8 are refused with a
message naming the field), never trusted or unpickled.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from devicerl.envs.foreign.remote import ProtocolError, blob_bytes
from devicerl.records import Observation, Task, TaskStatus, UIElement

_ELEMENT_FIELDS = frozenset(
    ("id", "role", "text", "value", "bbox", "clickable", "focused", "editable", "attrs")
)
_OBSERVATION_FIELDS = frozenset(("instruction", "screen_size", "screenshot", "elements", "extras"))
_STATUS_FIELDS = frozenset(("done", "success", "raw_reward", "info"))


def task_to_plain(task: Task) -> dict[str, Any]:
    """What a foreign device learns about the task it resets to."""
    return {
        "name": task.name,
        "instruction": task.instruction,
        "max_steps": task.max_steps,
        "params": dict(task.params),
    }


def _unknown(kind: str, d: dict[str, Any], known: frozenset[str]) -> None:
    extra = sorted(set(d) - known)
    if extra:
        raise ProtocolError(f"{kind} has unknown field {extra[0]!r} (known: {sorted(known)})")


def _typed(kind: str, name: str, value: Any, types: type | tuple[type, ...]) -> Any:
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in _as_tuple(types)):
        want = "/".join(t.__name__ for t in _as_tuple(types))
        raise ProtocolError(f"{kind} field {name!r} is a {type(value).__name__}, not {want}")
    return value


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _screenshot(ref: Any, blob: bytes) -> np.ndarray | None:
    if ref is None:
        return None
    if not isinstance(ref, dict) or ref.get("dtype") != "uint8":
        raise ProtocolError("observation field 'screenshot' is not a uint8 array")
    shape = ref.get("shape")
    if not (isinstance(shape, list) and len(shape) == 3 and shape[2] == 3):
        raise ProtocolError(f"observation screenshot has shape {shape!r}, not H x W x 3")
    data = blob_bytes(ref, blob)
    h, w = int(shape[0]), int(shape[1])
    if len(data) != h * w * 3:
        raise ProtocolError(f"observation screenshot has {len(data)} bytes for shape {shape}")
    return np.frombuffer(bytearray(data), dtype=np.uint8).reshape(h, w, 3)


def element_from_plain(d: Any) -> UIElement:
    """One `UIElement` from its plain form (``bbox``: left, top, right, bottom in pixels)."""
    _typed("element", "element", d, dict)
    _unknown("element", d, _ELEMENT_FIELDS)
    bbox = d.get("bbox", [0.0, 0.0, 0.0, 0.0])
    if not (isinstance(bbox, list) and len(bbox) == 4):
        raise ProtocolError(f"element {d.get('id')!r} bbox {bbox!r} is not 4 numbers")
    box = tuple(float(_typed("element", "bbox", v, (int, float))) for v in bbox)
    if not all(math.isfinite(v) for v in box):
        raise ProtocolError(f"element {d.get('id')!r} bbox {bbox!r} is not finite")
    return UIElement(
        id=str(_typed("element", "id", d.get("id"), (str, int))),
        role=_typed("element", "role", d.get("role", ""), str),
        text=_typed("element", "text", d.get("text", ""), str),
        value=_typed("element", "value", d.get("value", ""), str),
        bbox=box,  # type: ignore[arg-type]
        clickable=_typed("element", "clickable", d.get("clickable", False), bool),
        focused=_typed("element", "focused", d.get("focused", False), bool),
        editable=_typed("element", "editable", d.get("editable", False), bool),
        attrs=dict(_typed("element", "attrs", d.get("attrs", {}), dict)),
    )


def observation_from_plain(d: Any, blob: bytes) -> Observation:
    """An `Observation` from its plain form and the frame's raw bytes."""
    _typed("observation", "observation", d, dict)
    _unknown("observation", d, _OBSERVATION_FIELDS)
    screenshot = _screenshot(d.get("screenshot"), blob)
    size = d.get("screen_size")
    if size is None and screenshot is not None:
        size = [screenshot.shape[1], screenshot.shape[0]]
    if not (isinstance(size, list) and len(size) == 2 and all(isinstance(v, int) for v in size)):
        raise ProtocolError(f"observation screen_size {size!r} is not [width, height]")
    elements = _typed("observation", "elements", d.get("elements", []), list)
    return Observation(
        instruction=_typed("observation", "instruction", d.get("instruction", ""), str),
        screen_size=(int(size[0]), int(size[1])),
        screenshot=screenshot,
        elements=[element_from_plain(e) for e in elements],
        extras=dict(_typed("observation", "extras", d.get("extras", {}), dict)),
    )


def status_from_plain(d: Any) -> TaskStatus:
    """The task's verdict after a step (``info`` is passed through as it came)."""
    _typed("status", "status", d, dict)
    _unknown("status", d, _STATUS_FIELDS)
    raw = float(_typed("status", "raw_reward", d.get("raw_reward", 0.0), (int, float)))
    if not math.isfinite(raw):
        raise ProtocolError(f"status raw_reward {raw!r} is not finite")
    return TaskStatus(
        done=_typed("status", "done", d.get("done", False), bool),
        success=_typed("status", "success", d.get("success", False), bool),
        raw_reward=raw,
        info=dict(_typed("status", "info", d.get("info", {}), dict)),
    )
