"""Action kinds: what a task's solution needs and what an agent can express.

The AitW action space (dual-point gestures anywhere, any typed text, Enter / back / home,
complete) covers more than a given agent can say. `ActionKind` names the kinds of action a
MiniWoB++ solution is made of (`devicerl.tasks.miniwob_reach` lists them per task); an agent
declares the kinds it can produce, derived from its code and config (`small_agent_kinds`), so
the reach report (``devicerl tasks --reach miniwob``) says task by task what is missing.
"""

from __future__ import annotations

from enum import Enum

from devicerl.actions import ActionType


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


def small_agent_kinds(config: object) -> frozenset[ActionKind]:
    """The kinds the small agent (`devicerl.agents.small`) can produce with ``config`` (a
    `SmallAgentConfig`): taps land on element centres (which also picks options in a picker),
    swipes are four fixed ones from the screen centre (scrolling), typed text is a span of the
    instruction, Enter when allowed, pixels only with a screenshot input. Its options add
    free-point taps and drags (``point_actions``), page-text spans (``page_text``), computed
    text (``free_text``: the character decoder) and pixels (``features.pixels``)."""
    allowed = getattr(config, "allowed_types", None)

    def has(t: ActionType) -> bool:
        return allowed is None or t.value in allowed

    kinds: set[ActionKind] = set()
    if has(ActionType.DUAL_POINT):
        kinds |= {ActionKind.TAP, ActionKind.SELECT}
        if getattr(config, "swipes", False):
            kinds.add(ActionKind.SCROLL)
        if getattr(config, "point_actions", False):  # a drag scrolls too
            kinds |= {ActionKind.POINT, ActionKind.DRAG, ActionKind.SCROLL}
    if has(ActionType.TYPE):
        kinds.add(ActionKind.TYPE_INSTRUCTION)
        if getattr(config, "page_text", False):
            kinds.add(ActionKind.TYPE_PAGE)
        if getattr(config, "free_text", False):  # it also writes any page or instruction text
            kinds |= {ActionKind.TYPE_COMPUTED, ActionKind.TYPE_PAGE}
    if has(ActionType.PRESS_ENTER):
        kinds.add(ActionKind.ENTER)
    features = getattr(config, "features", None)
    if getattr(features, "screenshot_size", None) is not None or getattr(features, "pixels", False):
        kinds.add(ActionKind.PIXELS)
    return frozenset(kinds)
