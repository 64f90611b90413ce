"""Reach of the AitW action space on MiniWoB++: what each task's solution needs.

`NEEDS` maps every task of the ``miniwob`` suite to the `ActionKind`s a solution is made of on
our device (with its phone-style ``<select>`` pickers, `devicerl.envs.browser.pickers`): the
smallest set that a scripted solver, or a human on a phone, uses. `OUTSIDE` lists the tasks
that the AitW action space cannot solve, with the reason. `reach_rows` joins both with an
agent's declared kinds (`devicerl.agents.capabilities`) into the report that
``devicerl tasks --reach miniwob`` prints.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from devicerl.agents.capabilities import ActionKind

TAP = ActionKind.TAP
POINT = ActionKind.POINT
DRAG = ActionKind.DRAG
SCROLL = ActionKind.SCROLL
INSTR = ActionKind.TYPE_INSTRUCTION
PAGE = ActionKind.TYPE_PAGE
COMPUTED = ActionKind.TYPE_COMPUTED
ENTER = ActionKind.ENTER
SELECT = ActionKind.SELECT
PIXELS = ActionKind.PIXELS

_FLIGHT = (TAP, INSTR, SELECT, SCROLL)
_EMAIL_FORWARD = (TAP, INSTR, SCROLL)

#: Task (without ``miniwob/``) -> the kinds its solution needs.
NEEDS: dict[str, tuple[ActionKind, ...]] = {
    "ascending-numbers": (TAP,),
    "bisect-angle": (POINT, PIXELS),
    "book-flight": (TAP, INSTR, SCROLL),
    "book-flight-nodelay": (TAP, INSTR, SCROLL),
    "button-delay": (TAP,),
    "buy-ticket": (TAP,),
    "chase-circle": (POINT,),
    "choose-date": (TAP,),
    "choose-date-easy": (TAP,),
    "choose-date-medium": (TAP,),
    "choose-date-nodelay": (TAP,),
    "choose-list": (SELECT, TAP),
    "circle-center": (POINT, TAP),
    "click-button": (TAP,),
    "click-button-sequence": (TAP, POINT),
    "click-checkboxes": (TAP,),
    "click-checkboxes-large": (TAP,),
    "click-checkboxes-soft": (TAP,),
    "click-checkboxes-transfer": (TAP,),
    "click-collapsible": (TAP,),
    "click-collapsible-2": (TAP,),
    "click-collapsible-2-nodelay": (TAP,),
    "click-collapsible-nodelay": (TAP,),
    "click-color": (TAP, PIXELS),
    "click-dialog": (TAP,),
    "click-dialog-2": (TAP,),
    "click-link": (TAP,),
    "click-menu": (TAP,),
    "click-menu-2": (TAP,),
    "click-option": (TAP,),
    "click-pie": (TAP,),
    "click-pie-nodelay": (TAP,),
    "click-scroll-list": (SELECT, TAP, SCROLL),
    "click-shades": (TAP, PIXELS),
    "click-shape": (TAP, PIXELS),
    "click-tab": (TAP,),
    "click-tab-2": (TAP,),
    "click-tab-2-easy": (TAP,),
    "click-tab-2-hard": (TAP,),
    "click-tab-2-medium": (TAP,),
    "click-test": (TAP,),
    "click-test-2": (TAP, POINT),  # buttons may overlap: tap an uncovered point
    "click-test-transfer": (TAP, POINT),
    "click-widget": (TAP,),
    "copy-paste": (TAP, PAGE),
    "copy-paste-2": (TAP, PAGE),
    "count-shape": (TAP, PIXELS),
    "count-sides": (TAP, PIXELS),
    "daily-calendar": (TAP, INSTR, SCROLL),
    "drag-box": (DRAG,),
    "drag-circle": (DRAG, TAP),
    "drag-cube": (DRAG, PIXELS),
    "drag-items": (DRAG,),
    "drag-items-grid": (DRAG,),
    "drag-shapes": (DRAG, PIXELS, TAP),
    "drag-shapes-2": (DRAG, PIXELS, TAP),
    "drag-single-shape": (DRAG, TAP),
    "drag-sort-numbers": (DRAG, TAP),
    "draw-circle": (DRAG, TAP),
    "draw-line": (DRAG, TAP),
    "email-inbox": (TAP, INSTR, SCROLL),
    "email-inbox-delete": (TAP, SCROLL),
    "email-inbox-forward": _EMAIL_FORWARD,
    "email-inbox-forward-nl": _EMAIL_FORWARD,
    "email-inbox-forward-nl-turk": _EMAIL_FORWARD,
    "email-inbox-important": (TAP, SCROLL),
    "email-inbox-nl-turk": (TAP, INSTR, SCROLL),
    "email-inbox-noscroll": (TAP, INSTR),
    "email-inbox-reply": _EMAIL_FORWARD,
    "email-inbox-star-reply": _EMAIL_FORWARD,
    "enter-date": (TAP, INSTR),
    "enter-password": (TAP, INSTR),
    "enter-text": (TAP, INSTR),
    "enter-text-2": (TAP, COMPUTED),
    "enter-text-dynamic": (TAP, INSTR),
    "enter-time": (TAP, INSTR),
    "find-greatest": (TAP,),
    "find-midpoint": (POINT, TAP),
    "find-word": (TAP, PAGE),
    "focus-text": (TAP,),
    "focus-text-2": (TAP,),
    "form-sequence": (DRAG, TAP),
    "form-sequence-2": (TAP, INSTR),
    "form-sequence-3": (TAP,),
    "generate-number": (TAP,),
    "grid-coordinate": (POINT,),
    "guess-number": (TAP, COMPUTED),
    "highlight-text": (DRAG, TAP),
    "highlight-text-2": (DRAG, TAP),
    "hot-cold": (POINT,),
    "hover-shape": (POINT,),
    "identify-shape": (TAP, PIXELS),
    "login-user": (TAP, INSTR),
    "login-user-popup": (TAP, INSTR),
    "moving-items": (TAP,),
    "multi-layouts": (TAP, INSTR),
    "multi-orderings": (TAP, INSTR),
    "navigate-tree": (TAP,),
    "number-checkboxes": (TAP,),
    "odd-or-even": (TAP,),
    "order-food": (TAP, SCROLL),
    "phone-book": (TAP,),
    "read-table": (TAP, PAGE),
    "read-table-2": (TAP, PAGE),
    "resize-textarea": (DRAG, TAP),
    "right-angle": (POINT, TAP),
    "scroll-text": (TAP, PAGE),
    "scroll-text-2": (SCROLL, TAP),
    "search-engine": (TAP, INSTR),
    "sign-agreement": (TAP, SCROLL),
    "simon-says": (TAP, PIXELS),
    "simple-algebra": (TAP, COMPUTED),
    "simple-arithmetic": (TAP, COMPUTED),
    "social-media": (TAP,),
    "social-media-all": (TAP,),
    "social-media-some": (TAP,),
    "stock-market": (TAP,),
    "terminal": (TAP, COMPUTED, ENTER),
    "text-editor": (DRAG, TAP),
    "text-transform": (TAP, PAGE),
    "tic-tac-toe": (TAP,),
    "unicode-test": (TAP,),
    "use-autocomplete": (TAP, INSTR),
    "use-autocomplete-nodelay": (TAP, INSTR),
    "use-colorwheel": (POINT, PIXELS, TAP),
    "use-colorwheel-2": (POINT, PIXELS, TAP),
    "use-slider": (DRAG, TAP),
    "use-slider-2": (DRAG, TAP),
    "use-spinner": (TAP,),
    "visual-addition": (TAP, COMPUTED, PIXELS),
    "flight.AA": _FLIGHT,
    "flight.Alaska": _FLIGHT,
    "flight.Alaska-auto": _FLIGHT,
    "flight.Alaska-auto-medium": _FLIGHT,
}

#: Tasks the AitW action space cannot solve on any device, and why.
OUTSIDE: dict[str, str] = {
    "draw-circle": "needs a curved stroke; an AitW gesture is one straight touch-to-lift segment",
    "hover-shape": "needs a resting pointer (hover) over a square that moves every 2 s, and "
    "grants no reward (its reward call is commented out in the task)",
    "chase-circle": "scores the time a resting pointer (hover) stays inside a moving circle; "
    "a phone has no hover, a tap is an instant",
}

#: Tasks that need keys, modifiers or a resting pointer the AitW action space lacks (on a
#: desktop page, or for some instances), and what our device does about it.
KEYS: dict[str, str] = {
    "click-scroll-list": "a desktop <select multiple> needs Ctrl/Shift-click to pick several "
    "options; reachable through the phone-style picker (a tap toggles an option)",
    "choose-list": "a desktop <select> opens a native pop-up that taps cannot reach (headless "
    "Chromium does not even draw it); reachable through the phone-style picker",
    "flight.AA": "as choose-list: <select> fields, reachable through the picker",
    "use-slider": "with more values than pixels on the track (e.g. 100 values on 69 px) some "
    "values lie between pixels: only the arrow keys reach them; the other instances are "
    "reachable by dragging",
    "use-slider-2": "as use-slider",
    "click-menu": "a nested item's submenu opens on hover only; a tap on its parent selects "
    "the parent, which ends the episode (-1); only top-level targets are reachable by taps",
}


@dataclass(frozen=True)
class ReachRow:
    """One task of the report: what it needs, what the agent lacks, why it is outside."""

    task: str
    needs: tuple[ActionKind, ...]
    missing: tuple[ActionKind, ...]
    outside: str = ""
    note: str = ""

    @property
    def reachable(self) -> bool:
        """The agent has every kind the task needs and the task is inside the action space."""
        return not self.missing and not self.outside


def reach_rows(tasks: Iterable[str], agent_kinds: Iterable[ActionKind]) -> list[ReachRow]:
    """One row per task (``miniwob/x`` or ``x``); a task absent from `NEEDS` raises KeyError
    naming it (the table must cover the whole suite)."""
    have = set(agent_kinds)
    rows = []
    for task in tasks:
        name = task.split("/", 1)[-1]
        if name not in NEEDS:
            raise KeyError(f"MiniWoB task {name!r} has no entry in miniwob_reach.NEEDS")
        needs = NEEDS[name]
        missing = tuple(k for k in needs if k not in have)
        rows.append(ReachRow(name, needs, missing, OUTSIDE.get(name, ""), KEYS.get(name, "")))
    return rows


def format_reach(rows: list[ReachRow]) -> str:
    """The report as text: a row per task, then per-kind and total counts."""
    width = max(len(r.task) for r in rows)
    lines = [f"{'task':{width}s}  {'agent':7s}  needs (missing marked *)"]
    for r in rows:
        status = "outside" if r.outside else ("yes" if r.reachable else "no")
        kinds = " ".join(k.value + ("*" if k in r.missing else "") for k in r.needs)
        extra = f"  -- {r.outside or r.note}" if (r.outside or r.note) else ""
        lines.append(f"{r.task:{width}s}  {status:7s}  {kinds}{extra}")
    lines.append("")
    lines.append("kinds (tasks needing it, of which the agent lacks it):")
    for kind in ActionKind:
        need = [r for r in rows if kind in r.needs]
        lack = [r for r in need if kind in r.missing]
        lines.append(f"  {kind.value:13s} {len(need):3d} {len(lack):3d}  {kind.description}")
    reach = sum(r.reachable for r in rows)
    outside = sum(bool(r.outside) for r in rows)
    lines.append(
        f"agent reaches {reach}/{len(rows)} tasks; {outside} outside the AitW action space"
    )
    return "\n".join(lines)
