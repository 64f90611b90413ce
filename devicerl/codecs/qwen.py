"""Qwen's ``mobile_use`` tool calls: Qwen2.5-VL (`MobileUse`) and Qwen3-VL (`MobileUseQwen3`).

The model answers with one tool call::

    <tool_call>
    {"name": "mobile_use", "arguments": {"action": "click", "coordinate": [935, 406]}}
    </tool_call>

as the Qwen2.5-VL and Qwen3-VL cookbooks have it (QwenLM/Qwen2.5-VL ``cookbooks/mobile_agent
.ipynb`` and ``cookbooks/utils/agent_function_call.py`` at f0af299; QwenLM/Qwen3-VL
``cookbooks/mobile_agent.ipynb`` at 9658872). The system message is the Qwen function-calling
block (``# Tools`` ... ``<tools>`` the ``mobile_use`` schema ``</tools>`` ... how to write a
``<tool_call>``); the user turn is ``The user query: ...`` and ``Task progress (You have done
the following operation on the current device): Step 1: ...; `` followed by the screenshot.

- Qwen2.5-VL writes pixels of the image after the processor's ``smart_resize`` and is told that
  image's size (``The screen's resolution is WxH``); its history repeats earlier calls as JSON.
- Qwen3-VL writes a 0-999 grid relative to the image (the cookbook tells it the resolution is
  999x999 and scales by ``point / 999 * size``); its history is a short sentence per step, and
  its action list has ``answer`` and no ``key``. The cookbook also asks for a
  ``Thought:`` and an ``Action:`` line before the call; devicerl asks for the call alone (the
  text a stored action is rendered to), and a reply with those lines parses the same.

devicerl's long press, open app, wait and answer are the schema's ``long_press`` (``time`` in
seconds), ``open`` (the app's name as ``text``), ``wait`` and ``answer``; the Qwen2.5-VL schema
has no ``answer`` and the Qwen3-VL one no ``open``: each is listed in the other's words, an
addition of devicerl's. What devicerl's action space does not hold (``key`` other than enter,
back and home, the Menu button) parses to an invalid action naming it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from devicerl.actions import DEFAULT_PRESS_S, DEFAULT_WAIT_S, Action, ActionType
from devicerl.codecs.base import ActionCodec, PromptStep, seconds
from devicerl.codecs.frames import Frame, Grid, Pixels
from devicerl.codecs.geometry import ImageGeometry, KeepSize, SmartResize

TOOL = "mobile_use"
_CALL_RE = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.S)
_BUTTONS = {"back": Action.back, "home": Action.home, "enter": Action.enter}
_BUTTON_NAMES = {ActionType.PRESS_BACK: "Back", ActionType.PRESS_HOME: "Home",
                 ActionType.PRESS_ENTER: "Enter"}  # fmt: skip
_KEYS = {"enter": "enter", "keycode_enter": "enter", "back": "back", "keycode_back": "back",
         "home": "home", "keycode_home": "home"}  # fmt: skip

#: The actions each schema offers, with what they do (the tool's ``action`` parameter).
_ACTIONS_25 = {
    "key": 'send a key event (adb keyevent names, e.g. "enter", "back")',
    "click": "click the point (x, y) of the screen",
    "long_press": "press the point (x, y) for `time` seconds",
    "swipe": "swipe from (x, y) to the point `coordinate2` (x2, y2)",
    "type": "type `text` into the focused input",
    "system_button": "press a system button",
    "open": "open the app named `text`",
    "wait": "wait `time` seconds for the screen to change",
    "terminate": "end the task, reporting its status",
    "answer": "give `text` as the answer",
}
_ACTIONS_3 = {
    "click": _ACTIONS_25["click"],
    "long_press": _ACTIONS_25["long_press"],
    "swipe": _ACTIONS_25["swipe"],
    "type": _ACTIONS_25["type"],
    "answer": _ACTIONS_25["answer"],
    "system_button": _ACTIONS_25["system_button"],
    "wait": _ACTIONS_25["wait"],
    "terminate": _ACTIONS_25["terminate"],
    "open": _ACTIONS_25["open"],
}


ARRAY, STRING = {"type": "array"}, {"type": "string"}


def _schema(width: int, height: int, actions: dict[str, str]) -> dict[str, Any]:
    """The ``mobile_use`` function: its description and parameters."""
    where = "(x, y): pixels from the left and from the top edge of the screen"
    listing = "\n".join(f"* `{name}`: {what}" for name, what in actions.items())
    return {
        "name": TOOL,
        "description": (
            "Use a touchscreen to interact with a mobile device, and take screenshots.\n"
            "* You can click, type, swipe and press buttons on the device.\n"
            "* Apps may need time to respond: wait and look at the next screenshot.\n"
            f"* The screen's resolution is {width}x{height}.\n"
            "* Click elements at their centre, not on their edges."
        ),
        "parameters": {
            "properties": {
                "action": {
                    "description": f"The action to perform:\n{listing}",
                    "enum": list(actions),
                    "type": "string",
                },
                "coordinate": {"description": f"{where} (click, long_press, swipe).", **ARRAY},
                "coordinate2": {"description": f"{where} (swipe's end).", **ARRAY},
                "text": {"description": "Text for key, type, open and answer.", **STRING},
                "time": {"description": "Seconds, for long_press and wait.", "type": "number"},
                "button": {
                    "description": "Back, Home, Menu or Enter (system_button).",
                    "enum": ["Back", "Home", "Menu", "Enter"],
                    **STRING,
                },
                "status": {
                    "description": "The task's status (terminate).",
                    "enum": ["success", "failure"],
                    **STRING,
                },
            },
            "required": ["action"],
            "type": "object",
        },
    }


def tools_block(function: dict[str, Any]) -> str:
    """Qwen's function-calling instructions around one function's schema."""
    schema = json.dumps({"type": "function", "function": function}, ensure_ascii=False)
    return (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        f"<tools>\n{schema}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


class MobileUse(ActionCodec):
    """Qwen2.5-VL's ``mobile_use`` tool calls, pixels of the resized image (module doc)."""

    name = "mobile_use"
    special_tokens = ("<tool_call>", "</tool_call>")
    #: Qwen2.5-VL's processor: 14-pixel patches merged 2 x 2, 4 to 16384 merged patches.
    served = SmartResize(28, 4 * 28 * 28, 16384 * 28 * 28)
    image_first = False
    frame: Frame = Pixels()
    actions = _ACTIONS_25
    preamble = "You are a helpful assistant.\n\n"

    # -- action text ----------------------------------------------------------------------------
    def arguments(self, action: Action, geometry: ImageGeometry) -> dict[str, Any]:
        """The call's ``arguments`` for a valid action."""
        kind = action.type
        if action.touch is not None:
            start = list(self.frame.write(action.touch, geometry))
            if kind is ActionType.LONG_PRESS:
                return {"action": "long_press", "coordinate": start, "time": action.duration_s}
            if action.is_tap:
                return {"action": "click", "coordinate": start}
            assert action.lift is not None
            end = list(self.frame.write(action.lift, geometry))
            return {"action": "swipe", "coordinate": start, "coordinate2": end}
        if action.is_terminal:
            ok = kind is ActionType.STATUS_TASK_COMPLETE
            return {"action": "terminate", "status": "success" if ok else "failure"}
        if kind in _BUTTON_NAMES:
            return {"action": "system_button", "button": _BUTTON_NAMES[kind]}
        return {
            ActionType.TYPE: lambda: {"action": "type", "text": action.text},
            ActionType.ANSWER: lambda: {"action": "answer", "text": action.text},
            ActionType.OPEN_APP: lambda: {"action": "open", "text": action.app},
            ActionType.WAIT: lambda: {"action": "wait", "time": action.duration_s},
        }[kind]()

    def call_json(self, action: Action, geometry: ImageGeometry) -> str:
        return json.dumps(
            {"name": TOOL, "arguments": self.arguments(action, geometry)}, ensure_ascii=False
        )

    def write(self, action: Action, geometry: ImageGeometry) -> str:
        return f"<tool_call>\n{self.call_json(action, geometry)}\n</tool_call>"

    def read(self, text: str, geometry: ImageGeometry) -> Action:
        m = _CALL_RE.search(text)
        body = m.group(1) if m else text
        start = body.find("{")
        if start < 0:
            return Action.invalid(text, "no tool call found")
        try:
            call, _ = json.JSONDecoder().raw_decode(body, start)
        except json.JSONDecodeError as e:
            return Action.invalid(text, f"the tool call is not JSON ({e.msg})")
        if not isinstance(call, dict) or not isinstance(call.get("arguments"), dict):
            return Action.invalid(text, "the tool call has no arguments object")
        if call.get("name", TOOL) != TOOL:
            return Action.invalid(text, f"calls {call.get('name')!r}, not {TOOL}")
        return self.action(call["arguments"], text, geometry)

    def action(self, args: dict[str, Any], text: str, geometry: ImageGeometry) -> Action:
        """The action of a call's arguments (invalid, with the reason, when it has none)."""
        kind = args.get("action")
        if kind in ("click", "swipe", "long_press"):
            return self.pointed(kind, args, text, geometry)
        if kind in ("type", "answer", "open"):
            value = args.get("text")
            if not isinstance(value, str):
                return Action.invalid(text, f"{kind} without a text string")
            make = {"type": Action.type_text, "answer": Action.answer, "open": Action.open_app}
            return make[kind](value)
        if kind == "wait":
            return Action.wait(seconds(args.get("time"), DEFAULT_WAIT_S))
        if kind == "terminate":
            status = args.get("status")
            if status not in ("success", "failure"):
                return Action.invalid(text, f"terminate with status {status!r}")
            return Action.complete() if status == "success" else Action.impossible()
        if kind == "system_button":
            press = _BUTTONS.get(str(args.get("button", "")).lower())
            return press() if press else Action.invalid(text, f"button {args.get('button')!r}")
        if kind == "key":
            key = _KEYS.get(str(args.get("text", "")).lower())
            return _BUTTONS[key]() if key else Action.invalid(text, f"key {args.get('text')!r}")
        return Action.invalid(text, f"action {kind!r} is not in devicerl's action space")

    def pointed(self, kind: str, args: dict[str, Any], text: str, geometry: ImageGeometry):
        """A click, a long press or a swipe from its coordinates."""
        touch = self.frame.read_pair(args.get("coordinate"), geometry)
        if isinstance(touch, str):
            return Action.invalid(text, f"{kind}: coordinate {touch}")
        if kind == "click":
            return Action.tap(*touch)
        if kind == "long_press":
            return Action.long_press(*touch, seconds(args.get("time"), DEFAULT_PRESS_S))
        lift = self.frame.read_pair(args.get("coordinate2"), geometry)
        if isinstance(lift, str):
            return Action.invalid(text, f"swipe: coordinate2 {lift}")
        return Action.swipe(*touch, *lift)

    def write_point(self, point, geometry: ImageGeometry) -> str:
        x, y = self.frame.write(point, geometry)
        return f"[{x}, {y}]"

    # -- prompt ---------------------------------------------------------------------------------
    def frame_size(self, geometry: ImageGeometry) -> tuple[int, int]:
        """The resolution the schema states."""
        return geometry.size

    def system(self, geometry: ImageGeometry) -> str:
        return self.preamble + tools_block(_schema(*self.frame_size(geometry), self.actions))

    def previous_text(self, action: Action, geometry: ImageGeometry) -> str:
        if action.is_invalid:
            return super().previous_text(action, geometry)
        return self.call_json(action, geometry)

    def progress(self, step: PromptStep) -> str:
        """The earlier actions as the cookbooks write task progress: ``Step 1: ...; ``."""
        return "".join(
            f"Step {i}: {self.previous_text(a, step.geometry)}; "
            for i, a in enumerate(step.previous, 1)
        )

    def user_text(self, step: PromptStep) -> str:
        text = (
            f"The user query: {step.instruction}\nTask progress (You have done the following "
            f"operation on the current device): {self.progress(step)}"
        )
        return text + (f"\nUI elements:\n{step.elements}" if step.elements else "")


class MobileUseQwen3(MobileUse):
    """Qwen3-VL's ``mobile_use`` tool calls, a 0-999 grid over the image (module doc)."""

    name = "mobile_use_qwen3"
    served = KeepSize()
    frame = Grid(999)
    actions = _ACTIONS_3
    preamble = ""

    def frame_size(self, geometry: ImageGeometry) -> tuple[int, int]:
        return 999, 999

    def previous_text(self, action: Action, geometry: ImageGeometry) -> str:
        """A short sentence per step, as Qwen3-VL's cookbook keeps its history (no double
        quotes)."""
        if action.is_invalid:
            return "An action that could not be read."
        args = self.arguments(action, geometry)
        kind = args["action"]
        if kind == "click":
            return "Click at ({}, {}).".format(*args["coordinate"])
        if kind == "swipe":
            return "Swipe from ({}, {}) to ({}, {}).".format(*args["coordinate"],
                                                            *args["coordinate2"])  # fmt: skip
        if kind == "long_press":
            return "Long press at ({}, {}) for {:g} s.".format(*args["coordinate"], args["time"])
        if kind in ("type", "answer", "open"):
            said = {"type": "Type", "answer": "Answer", "open": "Open the app"}[kind]
            return f"{said} {args['text']}.".replace('"', "").replace("\n", " ")
        if kind == "wait":
            return f"Wait {args['time']:g} s."
        if kind == "terminate":
            return f"Terminate with {args['status']}."
        return f"Press the {args['button']} button."

    def user_text(self, step: PromptStep) -> str:
        text = (
            f"The user query: {step.instruction}.\nTask progress (You have done the following "
            f"operation on the current device): {self.progress(step)}.\n"
        )
        return text + (f"UI elements:\n{step.elements}\n" if step.elements else "")
