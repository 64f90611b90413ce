"""Our actions as BrowserGym action strings, within the benchmark's own action set.

The mapping (docs/bring-your-benchmark.md has it as a table):

- a tap on an element's centre (within `CENTRE_TOLERANCE_PX`) chose that element:
  ``click('bid')`` (the smallest such element); any other tap: ``mouse_click(x, y)``;
- a swipe: ``mouse_drag_and_drop(x0, y0, x1, y1)``, or where the action set lacks it (MiniWoB's)
  ``mouse_down`` / ``mouse_move`` / ``mouse_up`` in one step;
- type: ``keyboard_type(text)`` (or ``fill`` into the focused element);
- Enter: ``keyboard_press('Enter')`` (or ``press`` on the focused element);
- back: ``go_back()``; home: ``goto`` the episode's first page;
- a long press: ``mouse_down``, ``noop(ms)``, ``mouse_up`` at the point, in one step (the
  action set takes several calls per step: the device's ``multiaction``); a wait: ``noop(ms)``;
- an answer: ``send_msg_to_user(text)`` where the set has chat (WebArena scores that message);
- task complete: ``send_msg_to_user(the episode's answer, or '')`` where the set has chat
  (WebArena scores the episode's last message when the agent speaks, so completing after an
  answer repeats it rather than replacing it with nothing), else nothing; task impossible:
  ``report_infeasible(...)``;
- opening an app: invalid (a browser has none); an invalid action: ``noop(0)``.

Coordinates are screenshot pixels, as BrowserGym's coordinate actions take them (it scales
them back to the page by its own zoom). An action the benchmark's set cannot express becomes
an invalid action (a no-op whose step records why), never a string BrowserGym would refuse.
"""

from __future__ import annotations

from collections.abc import Collection

from devicerl.actions import Action, ActionType
from devicerl.records import Observation, UIElement

#: A tap this close to an element's centre (pixels, each axis) chose that element: agents that
#: pick elements tap their centres.
CENTRE_TOLERANCE_PX = 1.0
#: What an invalid action does.
NOOP = "noop(0)"


class Unmappable(ValueError):
    """The benchmark's action set cannot express this action (the reason is the message)."""


def chosen_element(obs: Observation, x: float, y: float) -> UIElement | None:
    """The element whose centre the tap at normalised (x, y) hit, if any (the smallest)."""
    px, py = obs.to_pixels(x, y)
    hits = [
        e
        for e in obs.elements
        if abs(e.center[0] - px) <= CENTRE_TOLERANCE_PX
        and abs(e.center[1] - py) <= CENTRE_TOLERANCE_PX
    ]
    return min(hits, key=lambda e: e.area) if hits else None


def _call(name: str, *args: object) -> str:
    def literal(v: object) -> str:
        return f"{v:.1f}" if isinstance(v, float) else repr(v)

    return f"{name}({', '.join(literal(a) for a in args)})"


def _focused(obs: Observation) -> str | None:
    return next((e.id for e in obs.elements if e.focused), None)


def _need(available: Collection[str], *names: str) -> bool:
    return all(n in available for n in names)


def to_browsergym(
    action: Action,
    obs: Observation,
    available: Collection[str],
    start_url: str = "",
    answer: str | None = None,
) -> str:
    """The BrowserGym action string for ``action`` on the screen ``obs`` shows, using only the
    functions in ``available`` (the benchmark's action set); ``answer`` is the episode's answer
    so far (`DeviceEnv.answer`), which task complete repeats. Raises `Unmappable`."""
    kind = action.type
    if kind is ActionType.INVALID:
        return NOOP
    if kind is ActionType.DUAL_POINT:
        return _pointer(action, obs, available)
    if kind is ActionType.TYPE:
        if _need(available, "keyboard_type"):
            return _call("keyboard_type", action.text)
        focused = _focused(obs)
        if focused is not None and _need(available, "fill"):
            return _call("fill", focused, action.text)
        raise Unmappable("this benchmark's action set cannot type here (no keyboard_type)")
    if kind is ActionType.PRESS_ENTER:
        if _need(available, "keyboard_press"):
            return _call("keyboard_press", "Enter")
        focused = _focused(obs)
        if focused is not None and _need(available, "press"):
            return _call("press", focused, "Enter")
        raise Unmappable("this benchmark's action set has no key press")
    if kind is ActionType.PRESS_BACK:
        if _need(available, "go_back"):
            return "go_back()"
        raise Unmappable("this benchmark's action set has no go_back")
    if kind is ActionType.PRESS_HOME:
        if _need(available, "goto") and start_url:
            return _call("goto", start_url)
        raise Unmappable("this benchmark's action set has no goto")
    if kind is ActionType.WAIT:
        return _call("noop", _ms(action.duration_s))
    if kind is ActionType.LONG_PRESS:
        return _long_press(action, obs, available)
    if kind is ActionType.ANSWER:
        if _need(available, "send_msg_to_user"):
            return _call("send_msg_to_user", action.text)
        raise Unmappable("this benchmark's action set has no chat to answer in")
    if kind is ActionType.OPEN_APP:
        raise Unmappable("a browser has no apps to open")
    if kind is ActionType.STATUS_TASK_COMPLETE:
        said = answer or ""
        return _call("send_msg_to_user", said) if _need(available, "send_msg_to_user") else NOOP
    if kind is ActionType.STATUS_TASK_IMPOSSIBLE:
        if _need(available, "report_infeasible"):
            return _call("report_infeasible", "the task is impossible")
        return NOOP
    raise Unmappable(f"{kind.value} has no BrowserGym counterpart")


def _ms(seconds: float | None) -> int:
    return round((seconds or 0.0) * 1000)


def _long_press(action: Action, obs: Observation, available: Collection[str]) -> str:
    """Press at the point, hold for the action's duration, release: one step."""
    if not _need(available, "mouse_down", "mouse_up", "noop"):
        raise Unmappable("this benchmark's action set cannot hold the pointer down")
    assert action.touch is not None
    x, y = obs.to_pixels(*action.touch)
    calls = (_call("mouse_down", x, y), _call("noop", _ms(action.duration_s)))
    return "\n".join((*calls, _call("mouse_up", x, y)))


def _pointer(action: Action, obs: Observation, available: Collection[str]) -> str:
    assert action.touch is not None and action.lift is not None
    x0, y0 = obs.to_pixels(*action.touch)
    if action.is_tap:
        element = chosen_element(obs, *action.touch)
        if element is not None and _need(available, "click"):
            return _call("click", element.id)
        if _need(available, "mouse_click"):
            return _call("mouse_click", x0, y0)
        if element is not None:
            raise Unmappable("this benchmark's action set has no click")
        raise Unmappable("this benchmark's action set cannot click a point (no mouse_click)")
    x1, y1 = obs.to_pixels(*action.lift)
    if _need(available, "mouse_drag_and_drop"):
        return _call("mouse_drag_and_drop", x0, y0, x1, y1)
    if _need(available, "mouse_down", "mouse_move", "mouse_up"):
        return "\n".join(
            (_call("mouse_down", x0, y0), _call("mouse_move", x1, y1), _call("mouse_up", x1, y1))
        )
    raise Unmappable("this benchmark's action set cannot drag")
