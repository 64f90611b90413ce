"""UI-TARS' action calls: UI-TARS (`UITars`, on Qwen2-VL) and UI-TARS-1.5 (`UITars15`, on
Qwen2.5-VL).

The model answers ``Action: click(start_box='<|box_start|>(235,512)<|box_end|>')`` after an
optional ``Thought: ...`` (bytedance/UI-TARS at 582f3a7: ``README_v1.md``'s mobile and computer
prompt templates, ``README_deploy.md``, ``README_coordinates.md``,
``codes/ui_tars/action_parser.py``). The chat is the family's: a plain system message, a user
turn with the task framing, the action space and ``## User Instruction``, then each earlier
action as an assistant turn (``Action: ...`` with box tokens around its points, as the deploy
guide adds them to history) and the screenshot in the last user turn.

- UI-TARS writes points on a 0-1000 grid relative to the image (``README_v1.md``: divide by
  1000), with the box tokens in its output as in its action space.
- UI-TARS-1.5 writes pixels of the image after Qwen2.5-VL's ``smart_resize``
  (``README_coordinates.md``: 28-pixel factor, 100 x 28 x 28 to 16384 x 28 x 28 pixels) and its
  output has no box tokens (``start_box='(177,549)'``, ``README_deploy.md``).

devicerl asks for the ``Action:`` line alone (``## Output Format``), the form of UI-TARS'
training example; a reply with a thought parses the same. Swipes are written
``scroll(start_box=..., end_box=...)`` (the mobile template's two-point form); Enter is
``hotkey(key='enter')`` and impossible is ``call_user()`` (the computer template's). Read too:
``drag(start_box, end_box)``, ``scroll(start_box, direction)`` (a swipe a quarter of the screen
long, the finger moving against ``direction``), ``<point>x y</point>`` points and four-number
boxes (their centre). devicerl's long press is the mobile template's ``long_press(start_box,
time)``, open app ``open_app(app_name)`` (UI-TARS-1.5's mobile prompt), wait the computer
template's ``wait()`` (5 s; another duration is written ``wait(time='2')``); an answer is
``answer(content='...')``, devicerl's addition (UI-TARS' own ``finished(content=...)`` ends the
task, which devicerl's answer does not: it reads as complete). The mouse's double and right
clicks parse to an invalid action naming them.
"""

from __future__ import annotations

import re

from devicerl.actions import DEFAULT_PRESS_S, Action, ActionType, Point
from devicerl.codecs.base import ActionCodec, PromptStep, message, seconds, seconds_text
from devicerl.codecs.calls import Call, find_call, quote
from devicerl.codecs.frames import Frame, Grid, Pixels
from devicerl.codecs.geometry import ImageGeometry, KeepSize, SmartResize

BOX_START, BOX_END = "<|box_start|>", "<|box_end|>"
NAMES = ("click", "long_press", "type", "scroll", "drag", "press_home", "press_back", "hotkey",
         "finished", "call_user", "open_app", "wait", "answer", "left_double",
         "right_single")  # fmt: skip
#: How long UI-TARS' ``wait()`` sleeps (its computer template's).
WAIT_S = 5.0
#: How far a ``scroll(start_box, direction)`` moves the finger, in screen heights / widths.
SCROLL_LENGTH = 0.25
_NUM = re.compile(r"-?\d+(?:\.\d+)?")
_KEYS = {"enter": Action.enter, "back": Action.back, "home": Action.home}
_DIRECTIONS = {"up": (0.0, 1.0), "down": (0.0, -1.0), "left": (1.0, 0.0), "right": (-1.0, 0.0)}

_ACTION_SPACE = """click(start_box='<|box_start|>(x1,y1)<|box_end|>')
long_press(start_box='<|box_start|>(x1,y1)<|box_end|>', time='')
type(content='') # Escape \\', \\" and \\n in content so it reads as a Python string.
scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>')
open_app(app_name='')
hotkey(key='enter')
press_home()
press_back()
wait() # Sleep for 5 s, then look at the screen again.
answer(content='') # Tell the user the answer the task asks for, then finish.
finished() # The task is done.
call_user() # The task cannot be done: hand it back to the user."""


class UITars(ActionCodec):
    """UI-TARS' action calls on a 0-1000 grid (see the module doc)."""

    name = "ui_tars"
    special_tokens = (BOX_START, BOX_END)
    served = KeepSize()
    frame: Frame = Grid(1000)
    #: Box tokens around points in the model's own output.
    boxed_output = True

    # -- action text ----------------------------------------------------------------------------
    def box(self, point: Point, geometry: ImageGeometry, boxed: bool) -> str:
        x, y = self.frame.write(point, geometry)
        return f"{BOX_START}({x},{y}){BOX_END}" if boxed else f"({x},{y})"

    def call(self, action: Action, geometry: ImageGeometry, boxed: bool) -> str:
        """The call for a valid action."""
        if action.touch is not None:
            start = self.box(action.touch, geometry, boxed)
            if action.type is ActionType.LONG_PRESS:
                return f"long_press(start_box='{start}', time='{seconds_text(action.duration_s)}')"
            if action.is_tap:
                return f"click(start_box='{start}')"
            assert action.lift is not None
            end = self.box(action.lift, geometry, boxed)
            return f"scroll(start_box='{start}', end_box='{end}')"
        if action.type is ActionType.WAIT:  # UI-TARS' own wait is 5 s; others name their time
            d = action.duration_s
            return "wait()" if d == WAIT_S else f"wait(time='{seconds_text(d)}')"
        return {
            "TYPE": lambda: f"type(content={quote(action.text)})",
            "ANSWER": lambda: f"answer(content={quote(action.text)})",
            "OPEN_APP": lambda: f"open_app(app_name={quote(action.app)})",
            "PRESS_BACK": lambda: "press_back()",
            "PRESS_HOME": lambda: "press_home()",
            "PRESS_ENTER": lambda: "hotkey(key='enter')",
            "STATUS_TASK_COMPLETE": lambda: "finished()",
            "STATUS_TASK_IMPOSSIBLE": lambda: "call_user()",
        }[action.type.value]()

    def write(self, action: Action, geometry: ImageGeometry) -> str:
        return f"Action: {self.call(action, geometry, self.boxed_output)}"

    def read(self, text: str, geometry: ImageGeometry) -> Action:
        line = re.search(r"^\s*Action:", text, re.M)  # the first line that is the action's
        body = text[line.end() :] if line is not None else text
        found = find_call(body, NAMES)
        if isinstance(found, str):
            typed = re.search(r"(?<![\w.])type\(content='(.*)'\)", body, re.S)
            if typed is None:  # unescaped quotes inside the content: up to the last "')"
                return Action.invalid(text, found)
            found = Call("type", kwargs={"content": typed.group(1)})
        return self.action(found, text, geometry)

    def action(self, call: Call, text: str, geometry: ImageGeometry) -> Action:
        name = call.name
        if name in ("click", "scroll", "drag", "long_press"):
            start = self.point(call.arg("start_box", 0) or call.arg("point"), geometry)
            if isinstance(start, str):
                return Action.invalid(text, f"{name}: start_box {start}")
            if name == "click":
                return Action.tap(*start)
            if name == "long_press":
                return Action.long_press(*start, seconds(call.arg("time"), DEFAULT_PRESS_S))
            if name == "scroll" and call.arg("end_box", 1) is None:
                return self.scrolled(start, call.arg("direction"), text)
            end = self.point(call.arg("end_box", 1), geometry)
            if isinstance(end, str):
                return Action.invalid(text, f"{name}: end_box {end}")
            return Action.swipe(*start, *end)
        if name in ("type", "answer", "open_app"):
            value = call.arg("app_name" if name == "open_app" else "content")
            if not isinstance(value, str):
                return Action.invalid(text, f"{name} without a string")
            make = {"type": Action.type_text, "answer": Action.answer, "open_app": Action.open_app}
            return make[name](value)
        if name == "wait":
            return Action.wait(seconds(call.arg("time"), WAIT_S))
        if name == "hotkey":
            press = _KEYS.get(str(call.arg("key") or call.arg("hotkey")).strip().lower())
            return press() if press else Action.invalid(text, f"hotkey {call.arg('key')!r}")
        fixed = {"press_back": Action.back, "press_home": Action.home,
                 "finished": Action.complete, "call_user": Action.impossible}  # fmt: skip
        if name in fixed:
            return fixed[name]()
        return Action.invalid(text, f"{name} is not in devicerl's action space")

    def point(self, value: object, geometry: ImageGeometry) -> Point | str:
        """A box argument (``(x,y)``, box tokens, ``<point>x y</point>`` or a four-number box)
        as a normalised screen point, or why it is not one."""
        if not isinstance(value, str):
            return f"{value!r} is not a point"
        bare = value.replace(BOX_START, "").replace(BOX_END, "")
        numbers = [float(n) for n in _NUM.findall(bare)]
        if len(numbers) == 4:
            numbers = [(numbers[0] + numbers[2]) / 2, (numbers[1] + numbers[3]) / 2]
        if len(numbers) != 2:
            return f"{value!r} is not an (x,y) point"
        point = self.frame.read(numbers[0], numbers[1], geometry)
        return point if point is not None else f"{value!r} is outside the screen"

    @staticmethod
    def scrolled(start: Point, direction: object, text: str) -> Action:
        """``scroll(start_box, direction)``: the finger moves against ``direction``."""
        move = _DIRECTIONS.get(str(direction).strip().lower())
        if move is None:
            return Action.invalid(text, f"scroll direction {direction!r}")
        x = min(max(start[0] + move[0] * SCROLL_LENGTH, 0.0), 1.0)
        y = min(max(start[1] + move[1] * SCROLL_LENGTH, 0.0), 1.0)
        return Action.swipe(*start, x, y)

    def write_point(self, point: Point, geometry: ImageGeometry) -> str:
        return self.box(point, geometry, boxed=False)

    # -- prompt ---------------------------------------------------------------------------------
    def system(self, geometry: ImageGeometry) -> str:
        return "You are a helpful assistant."

    def user_text(self, step: PromptStep) -> str:
        return (
            "You are a GUI agent. You are given a task and your action history, with "
            "screenshots. You need to perform the next action to complete the task.\n\n"
            f"## Output Format\n```\nAction: ...\n```\n\n## Action Space\n{_ACTION_SPACE}\n\n"
            f"## User Instruction\n{step.instruction}"
        )

    def previous_text(self, action: Action, geometry: ImageGeometry) -> str:
        if action.is_invalid:
            return super().previous_text(action, geometry)
        return f"Action: {self.call(action, geometry, boxed=True)}"

    def chat(self, step: PromptStep, system: str) -> list[dict]:
        """System, the task turn, earlier actions as assistant turns, then the screenshot (and
        the element list) in the last user turn; without history the screenshot follows the
        task in the first turn."""
        elements = f"UI elements:\n{step.elements}" if step.elements else None
        task = self.user_text(step)
        if not step.previous:
            text = task + (f"\n\n{elements}" if elements else "")
            return [message("system", system), message("user", text, step.image, False)]
        chat = [message("system", system), message("user", task)]
        chat += [message("assistant", self.previous_text(a, step.geometry)) for a in step.previous]
        if step.image or elements:
            chat.append(message("user", elements, step.image, image_first=True))
        return chat


class UITars15(UITars):
    """UI-TARS-1.5's action calls in pixels of the resized image (see the module doc)."""

    name = "ui_tars_1_5"
    served = SmartResize(28, 100 * 28 * 28, 16384 * 28 * 28)
    frame = Pixels()
    boxed_output = False
