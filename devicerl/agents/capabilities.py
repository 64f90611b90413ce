"""Action kinds: what a task's solution needs and what an agent can express.

The AitW action space (dual-point gestures anywhere, any typed text, Enter / back / home,
complete) covers more than a given agent can say. `ActionKind` names the kinds of action a
MiniWoB++ solution is made of (`devicerl.tasks.miniwob_reach` lists them per task); an agent
declares the kinds it can produce, derived from its code and config (the small agent's heads
each declare theirs: `devicerl.agents.small.parts.small_agent_kinds`), so
the reach report (``devicerl tasks --reach miniwob``) says task by task what is missing.
"""

from __future__ import annotations

from enum import Enum


class ActionKind(str, Enum):
    """One kind of action a solution may need (values are the report's column names)."""

    TAP = "tap"
    POINT = "point"
    DRAG = "drag"
    SCROLL = "scroll"
    TYPE_INSTRUCTION = "type-instr"
    TYPE_PAGE = "type-page"
    TYPE_COMPUTED = "type-computed"
    ENTER = "enter"
    SELECT = "select"
    PIXELS = "pixels"

    @property
    def description(self) -> str:
        return DESCRIPTIONS[self]


DESCRIPTIONS: dict[ActionKind, str] = {
    ActionKind.TAP: "tap a listed element (its centre)",
    ActionKind.POINT: "free-point tap (a point that is no element's centre)",
    ActionKind.DRAG: "drag / swipe from any point to any point (touch, then lift)",
    ActionKind.SCROLL: "swipe to scroll a list or page",
    ActionKind.TYPE_INSTRUCTION: "type a span of the instruction",
    ActionKind.TYPE_PAGE: "type text shown on the page (element text)",
    ActionKind.TYPE_COMPUTED: "type text that appears nowhere (case change, a number, ...)",
    ActionKind.ENTER: "press Enter",
    ActionKind.SELECT: "pick an option of a <select> (tap it in the phone-style picker)",
    ActionKind.PIXELS: "read colour / shape / position from the screenshot",
}
