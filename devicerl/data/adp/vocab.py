"""Actions as ADP ``api_action`` calls and back: the function vocabularies of the datasets ADP
converts (read at neulab/agent-data-protocol 09e778b, schema 1.2.0).

Written (one name per action type; coordinates in screenshot pixels, as AndroidControl,
AndroidWorld and BrowserGym write them), mobile (AndroidWorld / AndroidControl) | web (BrowserGym):

- tap: ``click(x, y)`` | ``mouse_click(x, y)``
- swipe: ``swipe(x0, y0, x1, y1)`` | ``mouse_drag_and_drop(from_x, from_y, to_x, to_y)``
- long press: ``long_press(x, y)`` (+ ``duration_s`` when not the default 1 s), both
- type: ``input_text(text)`` | ``keyboard_type(text)``
- enter: ``keyboard_enter()`` | ``keyboard_press(key="Enter")``
- back: ``navigate_back()`` | ``go_back()``
- home: ``navigate_home()``, both (BrowserGym has none)
- open app: ``open_app(app_name)``, both; wait: ``wait()`` (+ ``seconds`` when not 1 s), both
- answer: ``answer(text)`` | ``send_msg_to_user(text)``
- complete: ``status(goal_status="complete")`` | ``send_msg_to_user(text="")``
- impossible: ``status(goal_status="infeasible")`` | ``report_infeasible(reason="")``
- invalid: ``invalid(text, reason)`` (the model's text and why it is not an action)

A screen of unknown size (an import without images) writes a tap or a swipe as AitW's
``touch_and_lift(x0, y0, x1, y1)`` and a long press with ``normalised: true``, in normalised
coordinates.

Read: all of the above from either vocabulary, plus AitW's ``touch_and_lift`` (normalised),
``type(text)``, ``press(key_name=go_back|go_home|enter)`` and ``end(succeeds)``; AndroidControl's
``back()`` and ``scroll(direction)``; AndroidWorld's ``click(index)``, ``long_press(index)`` and
``swipe(direction)``; BrowserGym's ``click(bid)`` and ``scroll(delta_x, delta_y)``. A direction
becomes a swipe through the screen's centre over `DIRECTION_SPAN` of the screen (``scroll``: the
content moves that way, so the finger moves the other way; ``swipe``: the finger moves that
way). What our action space cannot express (double taps, element-targeted typing, Mind2Web's
clicks without a point, ``goto``, ``select``, a wait or press longer than
`devicerl.actions.MAX_DURATION_S`, code) becomes an invalid action carrying the call's text:
counted by the importer, never dropped. A value that is not what its field must be (a coordinate
that is text, infinite or beyond `MAX_COORD`) is a `ValueError` naming the field: malformed
data, not an action to keep.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from devicerl.actions import (
    DEFAULT_PRESS_S,
    DEFAULT_WAIT_S,
    MAX_DURATION_S,
    Action,
    ActionType,
)
from devicerl.records import UIElement

#: The largest coordinate (in pixels) a call may carry; beyond it the line is malformed.
MAX_COORD = 1e7
#: How far a direction-only scroll or swipe moves the finger, as a share of the screen.
DIRECTION_SPAN = 0.5


@dataclass(frozen=True)
class Screen:
    """What a call is read and written against: the screen size in pixels ((0, 0): unknown),
    its UI elements (element-targeted calls) and whether it is a web page (vocabulary)."""

    size: tuple[int, int] = (0, 0)
    elements: Sequence[UIElement] = ()
    web: bool = False

    @property
    def known(self) -> bool:
        return self.size[0] > 0 and self.size[1] > 0


# -- written ---------------------------------------------------------------------------------
_Written = dict[ActionType, tuple[str, Callable[[Action], dict[str, Any]]]]
_NONE: Callable[[Action], dict[str, Any]] = lambda a: {}  # noqa: E731
_TEXT: Callable[[Action], dict[str, Any]] = lambda a: {"text": a.text}  # noqa: E731
_BOTH: _Written = {
    ActionType.PRESS_HOME: ("navigate_home", _NONE),
    ActionType.OPEN_APP: ("open_app", lambda a: {"app_name": a.app}),
    ActionType.WAIT: (
        "wait", lambda a: {} if a.duration_s == DEFAULT_WAIT_S else {"seconds": a.duration_s}
    ),
}  # fmt: skip
_MOBILE: _Written = {
    **_BOTH,
    ActionType.TYPE: ("input_text", _TEXT),
    ActionType.PRESS_ENTER: ("keyboard_enter", _NONE),
    ActionType.PRESS_BACK: ("navigate_back", _NONE),
    ActionType.STATUS_TASK_COMPLETE: ("status", lambda a: {"goal_status": "complete"}),
    ActionType.STATUS_TASK_IMPOSSIBLE: ("status", lambda a: {"goal_status": "infeasible"}),
    ActionType.ANSWER: ("answer", _TEXT),
}
_WEB: _Written = {
    **_BOTH,
    ActionType.TYPE: ("keyboard_type", _TEXT),
    ActionType.PRESS_ENTER: ("keyboard_press", lambda a: {"key": "Enter"}),
    ActionType.PRESS_BACK: ("go_back", _NONE),
    ActionType.STATUS_TASK_COMPLETE: ("send_msg_to_user", lambda a: {"text": ""}),
    ActionType.STATUS_TASK_IMPOSSIBLE: ("report_infeasible", lambda a: {"reason": ""}),
    ActionType.ANSWER: ("send_msg_to_user", _TEXT),
}


def to_call(action: Action, screen: Screen) -> tuple[str, dict[str, Any]]:
    """``action`` as an ADP api_action's (function, kwargs) on ``screen``."""
    kind = action.type
    if kind is ActionType.INVALID:
        return "invalid", {"text": action.raw, "reason": action.reason}
    if kind is ActionType.DUAL_POINT:
        return _point_call(action, screen)
    if kind is ActionType.LONG_PRESS:
        return _long_press_call(action, screen)
    name, kwargs = (_WEB if screen.web else _MOBILE)[kind]
    return name, kwargs(action)


def _long_press_call(action: Action, screen: Screen) -> tuple[str, dict[str, Any]]:
    assert action.touch is not None
    x, y = action.touch
    if screen.known:
        kwargs: dict[str, Any] = {"x": x * screen.size[0], "y": y * screen.size[1]}
    else:
        kwargs = {"x": x, "y": y, "normalised": True}
    if action.duration_s != DEFAULT_PRESS_S:
        kwargs["duration_s"] = action.duration_s
    return "long_press", kwargs


def _point_call(action: Action, screen: Screen) -> tuple[str, dict[str, Any]]:
    assert action.touch is not None and action.lift is not None
    (x0, y0), (x1, y1) = action.touch, action.lift
    if not screen.known:
        return "touch_and_lift", {"x0": x0, "y0": y0, "x1": x1, "y1": y1}
    w, h = screen.size
    p0, p1 = (x0 * w, y0 * h), (x1 * w, y1 * h)
    if action.touch == action.lift:
        return ("mouse_click" if screen.web else "click"), {"x": p0[0], "y": p0[1]}
    if screen.web:
        return "mouse_drag_and_drop", {
            "from_x": p0[0], "from_y": p0[1], "to_x": p1[0], "to_y": p1[1],
        }  # fmt: skip
    return "swipe", {"x0": p0[0], "y0": p0[1], "x1": p1[0], "y1": p1[1]}


# -- read ------------------------------------------------------------------------------------
class _NoMapping(Exception):
    """The call is well formed but our action space has no action for it (why in the text)."""


def call_text(function: str, kwargs: Mapping[str, Any]) -> str:
    """A call as text, as an invalid action keeps it: ``name({"arg": value, ...})``."""
    return f"{function}({json.dumps(kwargs, ensure_ascii=False, sort_keys=True, default=str)})"


def from_call(function: str, kwargs: Mapping[str, Any], screen: Screen) -> Action:
    """The action an api_action stands for on ``screen``; an invalid action (with the call's
    text and why) when our action space has none. Raises `ValueError` naming the field when a
    value is malformed."""
    reader = _READERS.get(function)
    try:
        if reader is None:
            raise _NoMapping(f"no devicerl action for ADP function {function!r}")
        return reader(kwargs, screen)
    except _NoMapping as e:
        return Action.invalid(call_text(function, kwargs), str(e))


def _number(kwargs: Mapping[str, Any], key: str) -> float:
    if key not in kwargs:
        raise _NoMapping(f"no {key!r} argument")
    v = kwargs[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"kwargs.{key} is {type(v).__name__} {str(v)[:40]!r}, not a number")
    if not (math.isfinite(v) and abs(v) <= MAX_COORD):
        raise ValueError(f"kwargs.{key} {v!r} is not a finite coordinate within {MAX_COORD:g}")
    return float(v)


def _text(kwargs: Mapping[str, Any], key: str, optional: bool = False) -> str:
    v = kwargs.get(key)
    if v is None:
        if optional:
            return ""
        raise _NoMapping(f"no {key!r} argument")
    if not isinstance(v, str):
        raise ValueError(f"kwargs.{key} is {type(v).__name__}, not text")
    return v


def _normalised(px: float, py: float, screen: Screen) -> tuple[float, float]:
    if not screen.known:
        raise _NoMapping("pixel coordinates on a screen of unknown size")
    x, y = px / screen.size[0], py / screen.size[1]
    if not (0.0 <= x <= 1.0 and 0.0 <= y <= 1.0):
        raise _NoMapping(
            f"({px:g}, {py:g}) is outside the {screen.size[0]}x{screen.size[1]} screen"
        )
    return x, y


def _pixels(
    kwargs: Mapping[str, Any], keys: tuple[str, str], screen: Screen
) -> tuple[float, float]:
    return _normalised(_number(kwargs, keys[0]), _number(kwargs, keys[1]), screen)


def _click(kwargs: Mapping[str, Any], screen: Screen) -> Action:
    if "x" in kwargs or "y" in kwargs:
        return Action.tap(*_pixels(kwargs, ("x", "y"), screen))
    if "index" in kwargs:  # AndroidWorld: the index of an element of the screen
        i = kwargs["index"]
        if isinstance(i, bool) or not isinstance(i, int):
            raise ValueError(f"kwargs.index is {type(i).__name__}, not an integer")
        if not 0 <= i < len(screen.elements):
            raise _NoMapping(f"element index {i} is not on the screen")
        return _tap_on(screen.elements[i], screen)
    target = next((k for k in ("bid", "element_id", "id") if k in kwargs), None)
    if target is None:
        raise _NoMapping("the click names no point and no element of the screen")
    bid = _text(kwargs, target)
    element = next((e for e in screen.elements if e.id == bid), None)
    if element is None:
        raise _NoMapping(f"element {bid!r} is not on the screen")
    return _tap_on(element, screen)


def _tap_on(element: UIElement, screen: Screen) -> Action:
    return Action.tap(*_normalised(*element.center, screen))


def _drag(keys: tuple[str, str, str, str]) -> Callable[[Mapping[str, Any], Screen], Action]:
    def read(kwargs: Mapping[str, Any], screen: Screen) -> Action:
        if all(k in kwargs for k in keys):
            a = _pixels(kwargs, keys[:2], screen)
            b = _pixels(kwargs, keys[2:], screen)
            return Action.swipe(*a, *b)
        if "direction" in kwargs:
            return _direction(kwargs, screen, finger=True)
        raise _NoMapping("no start and end points")

    return read


_DIRECTIONS = {"up": (0.0, -1.0), "down": (0.0, 1.0), "left": (-1.0, 0.0), "right": (1.0, 0.0)}


def _direction(kwargs: Mapping[str, Any], screen: Screen, *, finger: bool) -> Action:
    """A swipe through the centre; ``finger``: the direction is the finger's (a swipe), else
    the content's (a scroll: the finger moves the other way)."""
    name = _text(kwargs, "direction").strip().lower()
    if name not in _DIRECTIONS:
        raise _NoMapping(f"unknown direction {name!r}")
    dx, dy = _DIRECTIONS[name]
    s = DIRECTION_SPAN / 2 * (1.0 if finger else -1.0)
    return Action.swipe(0.5 - dx * s, 0.5 - dy * s, 0.5 + dx * s, 0.5 + dy * s)


def _scroll(kwargs: Mapping[str, Any], screen: Screen) -> Action:
    if "direction" in kwargs:
        return _direction(kwargs, screen, finger=False)
    if "delta_x" in kwargs or "delta_y" in kwargs:  # BrowserGym: the wheel's pixels
        dx = _number(kwargs, "delta_x") if "delta_x" in kwargs else 0.0
        dy = _number(kwargs, "delta_y") if "delta_y" in kwargs else 0.0
        if not screen.known:
            raise _NoMapping("a pixel scroll on a screen of unknown size")
        cx, cy = screen.size[0] / 2, screen.size[1] / 2
        a = _normalised(cx, cy, screen)
        return Action.swipe(*a, *_normalised(cx - dx, cy - dy, screen))
    raise _NoMapping("no direction")


def _touch_and_lift(kwargs: Mapping[str, Any], screen: Screen) -> Action:
    x0, y0, x1, y1 = (_number(kwargs, k) for k in ("x0", "y0", "x1", "y1"))
    if not all(0.0 <= v <= 1.0 for v in (x0, y0, x1, y1)):
        raise _NoMapping("touch_and_lift coordinates are outside [0, 1]")
    return Action.swipe(x0, y0, x1, y1)


def _type(kwargs: Mapping[str, Any], screen: Screen) -> Action:
    targeted = {"xpath", "bid", "element_id", "index"} & set(kwargs)
    if targeted:  # typing into a named element is a tap and a type: two of our actions
        raise _NoMapping(f"typing into an element ({sorted(targeted)[0]}) is two actions here")
    return Action.type_text(_text(kwargs, "text"))


def _press(kwargs: Mapping[str, Any], screen: Screen) -> Action:
    key = _text(kwargs, "key_name" if "key_name" in kwargs else "key").strip().lower()
    known = {
        "go_back": Action.back, "back": Action.back, "go_home": Action.home,
        "home": Action.home, "enter": Action.enter, "return": Action.enter,
    }  # fmt: skip
    if key not in known:
        raise _NoMapping(f"no devicerl action for the key {key!r}")
    return known[key]()


def _status(kwargs: Mapping[str, Any], screen: Screen) -> Action:
    goal = _text(kwargs, "goal_status").strip().lower()
    if goal in ("complete", "successful", "success"):
        return Action.complete()
    if goal in ("infeasible", "impossible", "failed"):
        return Action.impossible()
    raise _NoMapping(f"unknown goal_status {goal!r}")


def _end(kwargs: Mapping[str, Any], screen: Screen) -> Action:
    v = kwargs.get("succeeds")
    if not isinstance(v, bool):
        raise ValueError(f"kwargs.succeeds is {type(v).__name__}, not true or false")
    return Action.complete() if v else Action.impossible()


def _message(kwargs: Mapping[str, Any], screen: Screen) -> Action:
    text = _text(kwargs, "text", optional=True)
    return answer(text) if text else Action.complete()


def answer(text: str) -> Action:
    """An answer to the user (an agent's message); blank text has no answer action."""
    if not text.strip():
        raise _NoMapping("an empty answer")
    return Action.answer(text)


def _answer(kwargs: Mapping[str, Any], screen: Screen) -> Action:
    return answer(_text(kwargs, "text"))


def _seconds(kwargs: Mapping[str, Any], key: str, default: float) -> float:
    if kwargs.get(key) is None:
        return default
    v = _number(kwargs, key)
    if not 0.0 < v <= MAX_DURATION_S:
        raise _NoMapping(f"{key} {v:g} is outside (0, {MAX_DURATION_S:g}] seconds")
    return v


def _long_press(kwargs: Mapping[str, Any], screen: Screen) -> Action:
    seconds = _seconds(kwargs, "duration_s", DEFAULT_PRESS_S)
    if kwargs.get("normalised") is True:  # written for a screen of unknown size
        x, y = _number(kwargs, "x"), _number(kwargs, "y")
        if not (0.0 <= x <= 1.0 and 0.0 <= y <= 1.0):
            raise _NoMapping("normalised long_press coordinates are outside [0, 1]")
        return Action.long_press(x, y, seconds)
    tap = _click(kwargs, screen)  # a point or an element, as a click names it
    assert tap.touch is not None
    return Action.long_press(*tap.touch, seconds)


def _open_app(kwargs: Mapping[str, Any], screen: Screen) -> Action:
    name = _text(kwargs, "app_name")
    try:
        return Action.open_app(name)
    except ValueError as e:
        raise _NoMapping(str(e)) from None


def _wait(kwargs: Mapping[str, Any], screen: Screen) -> Action:
    return Action.wait(_seconds(kwargs, "seconds", DEFAULT_WAIT_S))


def _constant(make: Callable[[], Action]) -> Callable[[Mapping[str, Any], Screen], Action]:
    return lambda kwargs, screen: make()


_READERS: dict[str, Callable[[Mapping[str, Any], Screen], Action]] = {
    "invalid": lambda kw, s: Action.invalid(_text(kw, "text"), _text(kw, "reason", optional=True)),
    "click": _click,
    "mouse_click": lambda kw, s: Action.tap(*_pixels(kw, ("x", "y"), s)),
    "touch_and_lift": _touch_and_lift,
    "swipe": _drag(("x0", "y0", "x1", "y1")),
    "mouse_drag_and_drop": _drag(("from_x", "from_y", "to_x", "to_y")),
    "scroll": _scroll,
    "input_text": _type,
    "keyboard_type": _type,
    "type": _type,
    "keyboard_enter": _constant(Action.enter),
    "keyboard_press": _press,
    "press": _press,
    "navigate_back": _constant(Action.back),
    "back": _constant(Action.back),
    "go_back": _constant(Action.back),
    "navigate_home": _constant(Action.home),
    "status": _status,
    "end": _end,
    "send_msg_to_user": _message,
    "answer": _answer,
    "long_press": _long_press,
    "open_app": _open_app,
    "wait": _wait,
    "report_infeasible": _constant(Action.impossible),
}
