"""Aguvis-style pyautogui calls with coordinates normalised to the image (`Aguvis`).

The model answers one line of code: ``pyautogui.click(x=0.4844, y=0.1125)``,
``pyautogui.write(message='text')``, ``pyautogui.press(keys='enter')``,
``mobile.swipe(from_coord=[x, y], to_coord=[x, y])``, ``mobile.back()``, ``mobile.home()``,
``mobile.terminate(status='success')`` (xlang-ai/aguvis at 178c418: ``src/aguvis/constants.py``
and ``src/aguvis/serve/cli.py``; the call forms as huggingface/smol2operator at b38695c lists
them in ``preprocessing/action_conversion.py``). Points are [0, 1] across the image, 4 decimals.
The system message is Aguvis' agent message with the ``mobile.*`` functions as JSON schemas;
the user turn is the screenshot, then ``Please generate the next move ...``, ``Instruction:``
and ``Previous actions:`` (``Step i: <call>`` lines, or ``None``).

Aguvis itself opens its reply with a ``<|recipient|>`` token naming where the code runs; the
plain chat here has none, so the call is the whole reply (a reply with a thought before it
parses the same). devicerl's long press, open app, wait and answer are Aguvis'
``mobile.long_press(x=, y=)`` (1 s; another duration is written ``seconds=``),
``mobile.open_app(app_name=)``, ``mobile.wait(seconds=)`` and ``answer('...')``.
"""

from __future__ import annotations

import json
from typing import Any

from devicerl.actions import DEFAULT_PRESS_S, DEFAULT_WAIT_S, Action, ActionType, Point
from devicerl.codecs.base import ActionCodec, PromptStep, seconds, seconds_text
from devicerl.codecs.calls import Call, find_call, quote
from devicerl.codecs.frames import Unit
from devicerl.codecs.geometry import ImageGeometry

NAMES = ("pyautogui.click", "pyautogui.write", "pyautogui.press", "pyautogui.hotkey",
         "mobile.swipe", "mobile.back", "mobile.home", "mobile.terminate", "terminate",
         "mobile.long_press", "mobile.open_app", "mobile.wait", "answer")  # fmt: skip
_KEYS = {"enter": Action.enter, "return": Action.enter, "back": Action.back, "home": Action.home}


def _function(name: str, description: str, **params: tuple[str, str]) -> dict[str, Any]:
    """A function schema: ``params`` maps a name to (JSON type, description)."""
    out: dict[str, Any] = {"name": name, "description": description}
    if params:
        props = {k: {"type": t, "description": d} for k, (t, d) in params.items()}
        for spec in props.values():
            if spec["type"] == "array":
                spec["items"] = {"type": "number"}
        out["parameters"] = {"type": "object", "properties": props, "required": list(params)}
    return out


_FUNCTIONS = (
    _function("mobile.swipe", "Swipe on the screen",
              from_coord=("array", "The starting coordinates of the swipe"),
              to_coord=("array", "The ending coordinates of the swipe")),
    _function("mobile.home", "Press the home button"),
    _function("mobile.back", "Press the back button"),
    _function("mobile.wait", "Wait for the change to happen",
              seconds=("number", "The seconds to wait")),
    _function("mobile.long_press", "Long press on the screen",
              x=("number", "The x coordinate of the long press"),
              y=("number", "The y coordinate of the long press")),
    _function("mobile.open_app", "Open an app on the device",
              app_name=("string", "The name of the app to open")),
)  # fmt: skip


class Aguvis(ActionCodec):
    """Aguvis-style pyautogui calls (see the module doc)."""

    name = "aguvis"
    frame = Unit(4)

    # -- action text ----------------------------------------------------------------------------
    def write(self, action: Action, geometry: ImageGeometry) -> str:
        if action.touch is not None:
            x, y = self.frame.write(action.touch, geometry)
            if action.type is ActionType.LONG_PRESS:  # Aguvis' is 1 s; others name theirs
                d = action.duration_s
                held = "" if d == DEFAULT_PRESS_S else f", seconds={seconds_text(d)}"
                return f"mobile.long_press(x={x}, y={y}{held})"
            if action.is_tap:
                return f"pyautogui.click(x={x}, y={y})"
            assert action.lift is not None
            x2, y2 = self.frame.write(action.lift, geometry)
            return f"mobile.swipe(from_coord=[{x}, {y}], to_coord=[{x2}, {y2}])"
        return {
            ActionType.TYPE: lambda: f"pyautogui.write(message={quote(action.text)})",
            ActionType.ANSWER: lambda: f"answer({quote(action.text)})",
            ActionType.OPEN_APP: lambda: f"mobile.open_app(app_name={quote(action.app)})",
            ActionType.WAIT: lambda: f"mobile.wait(seconds={seconds_text(action.duration_s)})",
            ActionType.PRESS_BACK: lambda: "mobile.back()",
            ActionType.PRESS_HOME: lambda: "mobile.home()",
            ActionType.PRESS_ENTER: lambda: "pyautogui.press(keys='enter')",
            ActionType.STATUS_TASK_COMPLETE: lambda: "mobile.terminate(status='success')",
            ActionType.STATUS_TASK_IMPOSSIBLE: lambda: "mobile.terminate(status='failure')",
        }[action.type]()

    def read(self, text: str, geometry: ImageGeometry) -> Action:
        found = find_call(text, NAMES)
        if isinstance(found, str):
            return Action.invalid(text, found)
        return self.action(found, text, geometry)

    def action(self, call: Call, text: str, geometry: ImageGeometry) -> Action:
        name = call.name
        if name in ("pyautogui.click", "mobile.long_press"):
            point = self.frame.read_pair((call.arg("x", 0), call.arg("y", 1)), geometry)
            if isinstance(point, str):
                return Action.invalid(text, point)
            if name == "mobile.long_press":
                return Action.long_press(*point, seconds(call.arg("seconds"), DEFAULT_PRESS_S))
            return Action.tap(*point)
        if name == "mobile.swipe":
            start = self.frame.read_pair(call.arg("from_coord", 0), geometry)
            end = self.frame.read_pair(call.arg("to_coord", 1), geometry)
            for p in (start, end):
                if isinstance(p, str):
                    return Action.invalid(text, f"swipe: {p}")
            return Action.swipe(*start, *end)  # type: ignore[misc]
        if name in ("pyautogui.write", "answer", "mobile.open_app"):
            key = {"pyautogui.write": "message", "answer": "text", "mobile.open_app": "app_name"}
            value = call.arg(key[name], 0)
            if not isinstance(value, str):
                return Action.invalid(text, f"{name} without a {key[name]} string")
            make = {"pyautogui.write": Action.type_text, "answer": Action.answer,
                    "mobile.open_app": Action.open_app}  # fmt: skip
            return make[name](value)
        if name == "mobile.wait":
            return Action.wait(seconds(call.arg("seconds", 0), DEFAULT_WAIT_S))
        if name in ("pyautogui.press", "pyautogui.hotkey"):
            keys = call.arg("keys", 0)
            key = keys[0] if isinstance(keys, (list, tuple)) and len(keys) == 1 else keys
            press = _KEYS.get(str(key).strip().lower())
            return press() if press else Action.invalid(text, f"key {keys!r}")
        if name in ("mobile.terminate", "terminate"):
            status = call.arg("status", 0)
            if status not in ("success", "failure"):
                return Action.invalid(text, f"terminate with status {status!r}")
            return Action.complete() if status == "success" else Action.impossible()
        if name in ("mobile.back", "mobile.home"):
            return Action.back() if name == "mobile.back" else Action.home()
        return Action.invalid(text, f"{name} is not in devicerl's action space")

    def write_point(self, point: Point, geometry: ImageGeometry) -> str:
        x, y = self.frame.write(point, geometry)
        return f"(x={x}, y={y})"

    # -- prompt ---------------------------------------------------------------------------------
    def system(self, geometry: ImageGeometry) -> str:
        functions = "\n".join(f"- {json.dumps(f)}" for f in _FUNCTIONS)
        return (
            "You are a GUI agent. You are given a task and a screenshot of the screen. You need "
            "to perform a series of pyautogui actions to complete the task.\n\n"
            f"You have access to the following functions:\n{functions}\n"
        )

    def user_text(self, step: PromptStep) -> str:
        steps = [f"Step {i}: {self.previous_text(a, step.geometry)}"
                 for i, a in enumerate(step.previous, 1)]  # fmt: skip
        text = (
            "Please generate the next move according to the ui screenshot, instruction and "
            f"previous actions.\n\nInstruction: {step.instruction}\n\nPrevious actions:\n"
            + ("\n".join(steps) if steps else "None")
            + "\n"
        )
        return text + (f"\nUI elements:\n{step.elements}\n" if step.elements else "")
