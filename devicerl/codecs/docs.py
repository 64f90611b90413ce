"""The action space's documentation, written once; the devicerl JSON and AutoUI prompts are
generated from it.

Every example in `ACTION_DOCS` is an `Action`; the prompts render them through their own codec
and a test checks that each renders back to the same action and that every valid action type
is documented, so prompt text and codec cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from devicerl.actions import Action, ActionType


@dataclass(frozen=True)
class ActionDoc:
    """What one action type does and examples of it."""

    type: ActionType
    summary: str
    examples: tuple[Action, ...]


ACTION_DOCS: tuple[ActionDoc, ...] = (
    ActionDoc(
        ActionType.DUAL_POINT,
        "Touch the screen at touch_point and lift at lift_point. Equal points are a tap; "
        "distant points are a swipe (the finger moves from touch_point to lift_point). Points "
        "are [y, x], normalised to [0, 1] from the top-left corner.",
        (Action.tap(0.25, 0.5), Action.swipe(0.5, 0.8, 0.5, 0.3)),
    ),
    ActionDoc(
        ActionType.TYPE,
        "Type typed_text into the focused input (tap the input first). typed_text is a JSON "
        "string.",
        (Action.type_text("weather in Paris"),),
    ),
    ActionDoc(ActionType.PRESS_BACK, "Press the back button.", (Action.back(),)),
    ActionDoc(ActionType.PRESS_HOME, "Press the home button.", (Action.home(),)),
    ActionDoc(ActionType.PRESS_ENTER, "Press the enter key.", (Action.enter(),)),
    ActionDoc(
        ActionType.LONG_PRESS,
        "Touch one point and hold it for a number of seconds (opens context menus, selects text).",
        (Action.long_press(0.5, 0.4, 1.0),),
    ),
    ActionDoc(
        ActionType.OPEN_APP,
        "Open an app by its name (phones only; on a web page it does nothing).",
        (Action.open_app("Settings"),),
    ),
    ActionDoc(
        ActionType.WAIT,
        "Wait a number of seconds for the screen to finish loading.",
        (Action.wait(2.0),),
    ),
    ActionDoc(
        ActionType.ANSWER,
        "Tell the user the information the task asks for. It does not end the episode: "
        "declare the task complete afterwards.",
        (Action.answer("The meeting is at 3 pm"),),
    ),
    ActionDoc(
        ActionType.STATUS_TASK_COMPLETE,
        "Declare the task complete (ends the episode).",
        (Action.complete(),),
    ),
    ActionDoc(
        ActionType.STATUS_TASK_IMPOSSIBLE,
        "Declare the task impossible (ends the episode).",
        (Action.impossible(),),
    ),
)
