"""devicerl's own JSON action text: the default codec of families without a native one, and what
every VLM agent saved before codecs existed speaks.

The model writes one action as JSON, `Action.to_dict` with coordinates rounded to `PRECISION`
decimals, points as ``[x, y]`` normalised to the screen and a tap's lift point left out
(``{"type": "DUAL_POINT", "touch": [0.25, 0.5]}``). The system message is the action space
generated from `ACTION_DOCS` with examples written by `format_action`; the user turn is the
screenshot, then ``Instruction: ...`` / ``Previous actions:`` (one action text a line) /
optionally ``UI elements:`` / ``Next action:``. Coordinates are the screen's own: the geometry
of the image plays no part.
"""

from __future__ import annotations

import json
from typing import Any

from devicerl.actions import Action, ActionType
from devicerl.codecs.base import ActionCodec, PromptStep
from devicerl.codecs.docs import ACTION_DOCS
from devicerl.codecs.geometry import ImageGeometry
from devicerl.errors import DataError

#: Decimals of coordinates in prompts and action texts (a thousandth of the screen: finer than a
#: tap needs, short in tokens).
PRECISION = 3

#: What the instructions say of the two action types whose JSON fields differ from the fields
#: `ACTION_DOCS` describes (AutoUI's text: touch_point, typed_text, points as [y, x]).
_JSON_SUMMARIES = {
    ActionType.DUAL_POINT: (
        "Touch the screen at touch and lift at lift. A tap gives touch only; a swipe gives both "
        "(the finger moves from touch to lift). Points are [x, y], normalised to [0, 1] from the "
        "top-left corner."
    ),
    ActionType.TYPE: "Type text into the focused input (tap the input first).",
}


def format_action(action: Action) -> str:
    """An action as the JSON the model writes: `Action.to_dict` with rounded coordinates and no
    lift point for a tap. An invalid action is written back as its raw text."""
    if action.type is ActionType.INVALID:
        return action.raw
    d: dict[str, Any] = action.to_dict()
    if action.touch is not None:
        d["touch"] = [round(v, PRECISION) for v in action.touch]
        lift = [round(v, PRECISION) for v in action.lift or action.touch]
        if lift != d["touch"]:
            d["lift"] = lift
        else:
            d.pop("lift", None)
    return json.dumps(d, ensure_ascii=False)


def parse_action(text: str) -> Action:
    """The first JSON object in ``text`` read as an action (`Action.from_dict`). Never raises:
    anything else becomes an invalid action with the text and the reason."""
    if not isinstance(text, str):
        return Action.invalid(repr(text), "model output is not a string")
    decoder = json.JSONDecoder()
    start = text.find("{")
    reason = "no JSON object found"
    while start >= 0:
        try:
            obj, _ = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):
            start = text.find("{", start + 1)
            continue
        if not isinstance(obj, dict) or obj.get("type") == ActionType.INVALID.value:
            reason = "the JSON object is not an action"
            break
        try:
            return Action.from_dict(obj)
        except DataError as e:
            return Action.invalid(text, str(e)[:300])
        except Exception as e:  # defensive: model output must never crash a run
            return Action.invalid(text, f"parser error: {type(e).__name__}: {e}")
    return Action.invalid(text, reason)


def system_text() -> str:
    """The instructions: the task, the action space with examples written by `format_action`,
    the format."""
    lines = [
        "You operate a device (a phone or a web page) to carry out the user's instruction. You "
        "see a screenshot of the current screen. Choose the single next action.",
        "Actions (reply with exactly one, in this format):",
    ]
    for doc in ACTION_DOCS:
        summary = _JSON_SUMMARIES.get(doc.type, doc.summary)
        lines.append(f"- {doc.type.value}: {summary}")
        lines += [f"  Example: {format_action(a)}" for a in doc.examples]
    lines.append("Reply with the JSON object only.")
    return "\n".join(lines)


class JSONCodec(ActionCodec):
    """devicerl's JSON action text (see the module doc)."""

    name = "json"

    def write(self, action: Action, geometry: ImageGeometry) -> str:
        return format_action(action)

    def read(self, text: str, geometry: ImageGeometry) -> Action:
        return parse_action(text)

    def system(self, geometry: ImageGeometry) -> str:
        return system_text()

    def user_text(self, step: PromptStep) -> str:
        texts = [self.previous_text(a, step.geometry) for a in step.previous]
        parts = [f"Instruction: {step.instruction}"]
        parts.append("Previous actions:" + ("".join(f"\n{t}" for t in texts) if texts else " none"))
        if step.elements:
            parts.append("UI elements:\n" + step.elements)
        parts.append("Next action:")
        return "\n".join(parts)
