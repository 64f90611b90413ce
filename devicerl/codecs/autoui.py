"""The AutoUI text format as a codec: what the API agent prompts an endpoint for by default.

``Action Plan: [...] ; Action Decision: "action_type": "DUAL_POINT", "touch_point": "[y, x]",
...`` (`devicerl.actions.format_autoui` / `parse_autoui`, points [y, x] normalised to the screen,
3 decimals). The system message is the action space generated from `ACTION_DOCS` with examples
written by the codec itself; the user text holds the instruction, the previous actions joined by
`` | ``, optionally the UI elements (centres as [y, x]), and the screenshot after the text.
Coordinates are the screen's own: the geometry of the image plays no part.
"""

from __future__ import annotations

from devicerl.actions import Action, Point, format_autoui, parse_autoui
from devicerl.codecs.base import ActionCodec, PromptStep
from devicerl.codecs.docs import ACTION_DOCS
from devicerl.codecs.geometry import ImageGeometry
from devicerl.records import Observation

#: Decimals of coordinates in prompts and replies.
PRECISION = 3


def action_space_doc(precision: int = PRECISION) -> str:
    """The action space as prompt text, with examples written by the codec itself."""
    lines = ["Actions (reply with exactly one, in this format):"]
    for doc in ACTION_DOCS:
        lines.append(f"- {doc.type.value}: {doc.summary}")
        lines.extend(f"  Example: {format_autoui(a, precision=precision)}" for a in doc.examples)
    return "\n".join(lines)


def system_prompt(precision: int = PRECISION) -> str:
    return (
        "You operate a device (a phone or a web page) to carry out the user's instruction. "
        "You see a screenshot of the current screen and, when available, a list of its UI "
        "elements. Choose the single next action.\n"
        + action_space_doc(precision)
        + "\nStart your reply with 'Action Plan: [...] ; Action Decision: ' followed by the "
        "action's fields exactly as in the examples."
    )


class AutoUICodec(ActionCodec):
    """AutoUI's action text (see the module doc)."""

    name = "autoui"
    image_first = False

    def write(self, action: Action, geometry: ImageGeometry) -> str:
        return format_autoui(action, precision=PRECISION)

    def read(self, text: str, geometry: ImageGeometry) -> Action:
        return parse_autoui(text)

    def write_point(self, point: Point, geometry: ImageGeometry) -> str:
        return f"[{point[1]:.{PRECISION}f}, {point[0]:.{PRECISION}f}]"

    def system(self, geometry: ImageGeometry) -> str:
        return system_prompt(PRECISION)

    def user_text(self, step: PromptStep) -> str:
        prev = [self.previous_text(a, step.geometry) for a in step.previous]
        parts = [f"Instruction: {step.instruction}"]
        parts.append("Previous actions: " + (" | ".join(prev) if prev else "none"))
        if step.elements:
            parts.append("UI elements:\n" + step.elements)
        parts.append("What is the next action?")
        return "\n".join(parts)

    def elements_text(self, obs: Observation, geometry: ImageGeometry, limit: int) -> str:
        lines = []
        for el in obs.elements[:limit]:
            flags = [f for f, on in (("clickable", el.clickable), ("editable", el.editable),
                                     ("focused", el.focused)) if on]  # fmt: skip
            value = f" value={el.value!r}" if el.value else ""
            point = self.write_point(obs.to_normalised(*el.center), geometry)
            lines.append(
                f"- {el.role} {el.text!r}{value} at {point}"
                + (f" ({', '.join(flags)})" if flags else "")
            )
        if len(obs.elements) > limit:
            lines.append(f"- ... {len(obs.elements) - limit} more elements not listed")
        return "\n".join(lines)
