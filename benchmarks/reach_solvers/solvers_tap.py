"""Solvers made of taps on listed elements, and of picking options in the phone-style picker."""

from __future__ import annotations

import re

from devicerl.agents.capabilities import ActionKind
from devicerl.records import Observation, UIElement
from reach_solvers.kit import (
    Plan,
    drag,
    field,
    find,
    find_all,
    point,
    quoted,
    settle,
    solver,
    tap,
    tap_uncovered,
)

TAP, POINT, SELECT, SCROLL = ActionKind.TAP, ActionKind.POINT, ActionKind.SELECT, ActionKind.SCROLL


def _ordinal(text: str) -> int:
    match = re.search(r"(\d+)(?:st|nd|rd|th)", text)
    if match is None:
        raise LookupError(f"no ordinal in {text!r}")
    return int(match.group(1))


@solver("click-test", kinds=(TAP,))
def click_test(obs: Observation) -> Plan:
    yield tap(obs, find(obs, role="button"))


@solver("click-button", "unicode-test", kinds=(TAP,))
def click_named_button(obs: Observation) -> Plan:
    target = field(obs, "target") or quoted(obs.instruction)[0]
    yield tap(obs, find(obs, role="button", text=target))


@solver("click-test-2", "click-test-transfer", kinds=(TAP, POINT))
def click_overlapping_button(obs: Observation) -> Plan:
    """The two buttons may overlap: tap the target where the other does not cover it."""
    yield tap_uncovered(obs, find(obs, role="button", text=field(obs, "target")))


@solver("click-button-sequence", kinds=(TAP, POINT))
def click_button_sequence(obs: Observation) -> Plan:
    obs = yield tap_uncovered(obs, find(obs, role="button", text="ONE"))
    yield tap_uncovered(obs, find(obs, role="button", text="TWO"))


@solver("click-link", kinds=(TAP,))
def click_link(obs: Observation) -> Plan:
    yield tap(obs, find(obs, text=field(obs, "target"), where=lambda e: e.clickable))


@solver("click-dialog", kinds=(TAP,))
def click_dialog(obs: Observation) -> Plan:
    yield tap(obs, find(obs, role="button", text="Close"))


@solver("click-dialog-2", kinds=(TAP,))
def click_dialog_2(obs: Observation) -> Plan:
    target = field(obs, "target")
    yield tap(obs, find(obs, role="button", text="Close" if target == "x" else target))


@solver("click-tab", kinds=(TAP,))
def click_tab(obs: Observation) -> Plan:
    yield tap(obs, find(obs, text=f"Tab #{field(obs, 'target')}"))


@solver("click-tab-2", "click-tab-2-easy", "click-tab-2-medium", kinds=(TAP,))
def click_tab_2(obs: Observation) -> Plan:
    target = field(obs, "target")
    tabs = [e.text for e in find_all(obs, role="tab", where=lambda e: e.text.startswith("Tab #"))]

    def link(o: Observation) -> list:
        return find_all(o, text=target, where=lambda e: e.attrs.get("class") == "alink")

    for name in tabs:
        if link(obs):
            break
        obs = yield tap(obs, find(obs, text=name))
    yield tap(obs, link(obs)[0])


@solver("click-checkboxes", "click-checkboxes-large", "click-checkboxes-transfer", kinds=(TAP,))
def click_checkboxes(obs: Observation) -> Plan:
    fields = obs.extras.get("fields") or {}
    targets = [v for k, v in sorted(fields.items()) if k.startswith("target")]
    for name in targets:
        obs = yield tap(obs, find(obs, role="label", text=name))
    yield tap(obs, find(obs, role="button", text="Submit"))


@solver("click-option", kinds=(TAP,))
def click_option(obs: Observation) -> Plan:
    obs = yield tap(obs, find(obs, role="label", text=field(obs, "target")))
    yield tap(obs, find(obs, role="button", text="Submit"))


@solver("focus-text", kinds=(TAP,))
def focus_text(obs: Observation) -> Plan:
    yield tap(obs, find(obs, role="textbox"))


@solver("focus-text-2", kinds=(TAP,))
def focus_text_2(obs: Observation) -> Plan:
    yield tap(obs, find_all(obs, role="textbox")[_ordinal(obs.instruction) - 1])


_WIDGETS = {
    "button": lambda e: e.role == "button",
    "textarea": lambda e: e.attrs.get("tag") == "textarea",
    "text": lambda e: e.attrs.get("tag") == "input" and e.attrs.get("type") in ("text", "input"),
}


@solver("click-widget", kinds=(TAP,))
def click_widget(obs: Observation) -> Plan:
    target = field(obs, "target")
    is_it = _WIDGETS.get(target) or (lambda e: e.attrs.get("type") == target)
    yield tap(obs, find(obs, where=is_it))


@solver("click-collapsible", "click-collapsible-nodelay", kinds=(TAP,))
def click_collapsible(obs: Observation) -> Plan:
    obs = yield tap(obs, find(obs, role="tab"))
    settle(0.6)  # the section slides open; then look again (a tap on the instruction)
    obs = yield point(obs, obs.screen_size[0] / 2, 10)
    yield tap(obs, find(obs, role="button", text="Submit"))


@solver("choose-list", kinds=(SELECT, TAP))
def choose_list(obs: Observation) -> Plan:
    obs = yield tap(obs, find(obs, role="combobox"))
    obs = yield tap(obs, find(obs, role="option", text=field(obs, "target")))
    yield tap(obs, find(obs, role="button", text="Submit"))


def _picker_row(obs: Observation, name: str) -> UIElement | None:
    """The picker row labelled ``name`` when it is shown whole (a clipped row is cut short)."""
    rows = find_all(obs, role="label", text=name)
    return rows[0] if rows and rows[0].bbox[3] - rows[0].bbox[1] >= 20 else None


@solver("click-scroll-list", kinds=(SELECT, TAP, SCROLL))
def click_scroll_list(obs: Observation) -> Plan:
    obs = yield tap(obs, find(obs, role="combobox"))
    for name in field(obs, "target").split(", "):
        for direction in (-1, -1, -1, 1, 1, 1, 1, 1, 1):  # down the list, then back up
            if _picker_row(obs, name) is not None:
                break
            box = find(obs, role="listbox").bbox
            x, mid = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
            obs = yield drag(obs, (x, mid - 35 * direction), (x, mid + 35 * direction))
        row = _picker_row(obs, name)
        if row is None:
            raise LookupError(f"picker row {name!r} not found")
        obs = yield tap(obs, row)
    obs = yield tap(obs, find(obs, role="button", text="Done"))
    yield tap(obs, find(obs, role="button", text="Submit"))


@solver("scroll-text-2", kinds=(SCROLL, TAP))
def scroll_text_2(obs: Observation) -> Plan:
    """Swipe inside the text area towards the asked end (up: to the bottom) six times (more than
    its text ever needs), then submit."""
    left, top, right, bottom = find(obs, tag="textarea").bbox
    x = (left + right) / 2
    low, high = bottom - 8, top + 8
    start, end = (
        ((x, low), (x, high)) if field(obs, "target") == "bottom" else ((x, high), (x, low))
    )
    for _ in range(6):
        obs = yield drag(obs, start, end)
    yield tap(obs, find(obs, role="button", text="Submit"))
