"""The action space's documentation, written once; prompts are generated from it.

Every example in `ACTION_DOCS` is an `Action` rendered through `format_autoui`, and a test
checks that each renders back through `parse_autoui` to the same action and that every valid
action type is documented, so prompt text and codec cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from devicerl.actions import Action, ActionType, format_autoui
from devicerl.records import Observation


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


def action_space_doc(precision: int = 3) -> str:
    """The action space as prompt text, with examples written by the codec itself."""
    lines = ["Actions (reply with exactly one, in this format):"]
    for doc in ACTION_DOCS:
        lines.append(f"- {doc.type.value}: {doc.summary}")
        lines.extend(f"  Example: {format_autoui(a, precision=precision)}" for a in doc.examples)
    return "\n".join(lines)


def system_prompt(precision: int = 3) -> str:
    return (
        "You operate a device (a phone or a web page) to carry out the user's instruction. "
        "You see a screenshot of the current screen and, when available, a list of its UI "
        "elements. Choose the single next action.\n"
        + action_space_doc(precision)
        + "\nStart your reply with 'Action Plan: [...] ; Action Decision: ' followed by the "
        "action's fields exactly as in the examples."
    )


def _point(obs: Observation, px: float, py: float, precision: int) -> str:
    x, y = obs.to_normalised(px, py)
    return f"[{y:.{precision}f}, {x:.{precision}f}]"


def elements_text(obs: Observation, limit: int = 50, precision: int = 3) -> str:
    """One line per UI element: role, text, value, flags and centre as [y, x]."""
    lines = []
    for el in obs.elements[:limit]:
        flags = [f for f, on in (("clickable", el.clickable), ("editable", el.editable),
                                 ("focused", el.focused)) if on]  # fmt: skip
        value = f" value={el.value!r}" if el.value else ""
        lines.append(
            f"- {el.role} {el.text!r}{value} at {_point(obs, *el.center, precision)}"
            + (f" ({', '.join(flags)})" if flags else "")
        )
    if len(obs.elements) > limit:
        lines.append(f"- ... {len(obs.elements) - limit} more elements not listed")
    return "\n".join(lines)


def user_prompt(
    obs: Observation,
    previous: Sequence[Action | str] = (),
    include_elements: bool = True,
    max_elements: int = 50,
    precision: int = 3,
) -> str:
    """The per-step text: instruction, previous actions and (optionally) the element list."""
    parts = [f"Instruction: {obs.instruction}"]
    prev = [a if isinstance(a, str) else format_autoui(a, precision=precision) for a in previous]
    parts.append("Previous actions: " + (" | ".join(prev) if prev else "none"))
    if include_elements and obs.elements:
        parts.append("UI elements:\n" + elements_text(obs, max_elements, precision))
    parts.append("What is the next action?")
    return "\n".join(parts)
