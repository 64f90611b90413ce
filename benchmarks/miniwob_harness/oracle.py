"""A scripted MiniWoB++ oracle: one plan per task, run on any env through a small adapter.

A plan reads a neutral `View` of the page (utterance, fields, DOM nodes with boxes in task-area
pixels) and returns the next `Move` (click at a pixel, type text, press Enter) or None when it
has nothing left to do. The same plans drive our browser device (`MiniWoBOracle`, below) and
the official ``miniwob`` gymnasium env (`miniwob_harness.official`), which is how the
fidelity benchmark compares the two. Plans use only what both envs expose (tags, texts, values,
ids, classes, boxes) and keep a small per-episode memory (what they already clicked).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from devicerl.actions import Action
from devicerl.records import Observation


@dataclass(frozen=True)
class Node:
    """One DOM node as a plan sees it. ``tag`` is lower-case (``"t"``: a text fragment)."""

    tag: str
    text: str = ""
    value: str = ""
    html_id: str = ""
    classes: str = ""
    box: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    type: str = ""
    focused: bool = False

    @property
    def center(self) -> tuple[float, float]:
        left, top, right, bottom = self.box
        return ((left + right) / 2, (top + bottom) / 2)

    def has_class(self, name: str) -> bool:
        return name in self.classes.split()


@dataclass
class View:
    """The page as a plan sees it, plus the plan's memory for this episode."""

    utterance: str
    fields: dict[str, str]
    nodes: list[Node]
    memory: dict[str, Any] = field(default_factory=dict)

    def find(
        self,
        tag: str | None = None,
        text: str | None = None,
        html_id: str | None = None,
        cls: str | None = None,
    ) -> Node | None:
        """The first node matching every given criterion."""
        for n in self.nodes:
            if tag is not None and n.tag != tag:
                continue
            if text is not None and n.text != text:
                continue
            if html_id is not None and n.html_id != html_id:
                continue
            if cls is not None and not n.has_class(cls):
                continue
            return n
        return None


@dataclass(frozen=True)
class Click:
    x: float
    y: float


@dataclass(frozen=True)
class Type:
    text: str


@dataclass(frozen=True)
class Enter:
    pass


@dataclass(frozen=True)
class Wait:
    """Let an animation run: sleep ``seconds`` of wall-clock time, then a no-op step."""

    seconds: float = 0.15


Move = Click | Type | Enter | Wait
Plan = Callable[[View], "Move | None"]
PLANS: dict[str, Plan] = {}


def _plan(*names: str) -> Callable[[Plan], Plan]:
    def register(fn: Plan) -> Plan:
        for name in names:
            PLANS[name] = fn
        return fn

    return register


def _inside(x: float, y: float, box: tuple[float, float, float, float]) -> bool:
    return box[0] <= x <= box[2] and box[1] <= y <= box[3]


def _point(view: View, node: Node) -> Click:
    """A point of ``node`` that no other button covers (buttons may overlap)."""
    left, top, right, bottom = node.box
    others = [n.box for n in view.nodes if n is not node and n.tag == "button"]
    for fy in (0.5, 0.25, 0.75, 0.1, 0.9):
        for fx in (0.5, 0.25, 0.75, 0.1, 0.9):
            x, y = left + fx * (right - left), top + fy * (bottom - top)
            if not any(_inside(x, y, box) for box in others):
                return Click(x, y)
    return Click(*node.center)


def _click_once(view: View, key: str, node: Node | None) -> Move | None:
    """Click ``node`` unless this episode already did (memory key ``key``)."""
    if node is None or view.memory.get(key):
        return None
    view.memory[key] = True
    return _point(view, node)


def _fill(view: View, entries: list[tuple[str, str]], submit_id: str = "subbtn") -> Move | None:
    """Click each input (by html id), type its text, then click the submit button."""
    for html_id, text in entries:
        node = view.find(html_id=html_id)
        if node is None:
            return None
        if node.value == text:
            continue
        if not view.memory.get(f"focus:{html_id}"):
            view.memory[f"focus:{html_id}"] = True
            return Click(*node.center)
        if not view.memory.get(f"typed:{html_id}"):
            view.memory[f"typed:{html_id}"] = True
            return Type(text)
        return None  # typed but the value differs: give up rather than loop
    return _click_once(view, "submit", view.find(html_id=submit_id))


def _quoted(utterance: str) -> list[str]:
    return re.findall(r'"([^"]*)"', utterance)


# -- plans ----------------------------------------------------------------------------------
@_plan("click-test")
def _click_test(v: View) -> Move | None:
    return _click_once(v, "btn", v.find(html_id="subbtn"))


@_plan("click-test-2", "click-button", "unicode-test")
def _click_named_button(v: View) -> Move | None:
    target = v.fields.get("target") or (_quoted(v.utterance) or [""])[0]
    if not target:
        match = re.search(r"button (\S+)\.$", v.utterance)
        target = match.group(1) if match else ""
    return _click_once(v, "btn", v.find(tag="button", text=target))


@_plan("click-link")
def _click_link(v: View) -> Move | None:
    target = v.fields.get("target", "")
    node = next((n for n in v.nodes if n.has_class("alink") and n.text == target), None)
    return _click_once(v, "link", node)


@_plan("click-dialog")
def _click_dialog(v: View) -> Move | None:
    return _click_once(v, "close", v.find(cls="ui-dialog-titlebar-close"))


@_plan("click-dialog-2")
def _click_dialog_2(v: View) -> Move | None:
    target = v.fields.get("target", "")
    if target == "x":
        return _click_once(v, "btn", v.find(cls="ui-dialog-titlebar-close"))
    return _click_once(v, "btn", v.find(tag="button", text=target))


@_plan("click-tab")
def _click_tab(v: View) -> Move | None:
    return _click_once(v, "tab", v.find(tag="a", text=f"Tab #{v.fields.get('target', '')}"))


@_plan("click-button-sequence")
def _click_sequence(v: View) -> Move | None:
    return _click_once(v, "one", v.find(html_id="subbtn")) or _click_once(
        v, "two", v.find(html_id="subbtn2")
    )


@_plan("focus-text")
def _focus_text(v: View) -> Move | None:
    return _click_once(v, "input", v.find(html_id="tt"))


@_plan("focus-text-2")
def _focus_text_2(v: View) -> Move | None:
    match = re.search(r"the (\d)\w\w input", v.utterance)
    return _click_once(v, "input", v.find(html_id=f"tt{match.group(1)}") if match else None)


@_plan("enter-text", "enter-text-dynamic")
def _enter_text(v: View) -> Move | None:
    return _fill(v, [("tt", v.fields.get("target") or _quoted(v.utterance)[0])])


@_plan("enter-text-2")
def _enter_text_2(v: View) -> Move | None:
    text = _quoted(v.utterance)[0]
    text = text.upper() if "upper case" in v.utterance else text.lower()
    return _fill(v, [("tt", text)])


@_plan("enter-password")
def _enter_password(v: View) -> Move | None:
    password = v.fields.get("password") or _quoted(v.utterance)[0]
    return _fill(v, [("password", password), ("verify", password)])


@_plan("login-user")
def _login_user(v: View) -> Move | None:
    user, password = _quoted(v.utterance)[:2]
    return _fill(v, [("username", user), ("password", password)])


@_plan("simple-arithmetic")
def _simple_arithmetic(v: View) -> Move | None:
    problem = v.find(html_id="math-problem")
    match = re.match(r"(-?\d+) ([-+x]) (-?\d+)", problem.text if problem else "")
    if match is None:
        return None
    a, op, b = int(match.group(1)), match.group(2), int(match.group(3))
    answer = a + b if op == "+" else a - b if op == "-" else a * b
    return _fill(v, [("math-answer", str(answer))])


@_plan("find-word")
def _find_word(v: View) -> Move | None:
    match = re.search(r"the (\d+)\w\w word", v.utterance)
    para = next((n for n in v.nodes if n.tag == "p" and n.text), None)
    if match is None or para is None:
        return None
    words = para.text.split()
    index = int(match.group(1)) - 1
    if index >= len(words):
        return None
    return _fill(v, [("answer-input", re.sub(r"[^a-zA-Z]", "", words[index]))])


def _label_nodes(v: View) -> list[Node]:
    """Nodes that carry a checkbox/radio label's text (our labels, official text fragments)."""
    return [n for n in v.nodes if n.tag in ("label", "t") and n.text]


@_plan("click-checkboxes", "click-option")
def _click_checkboxes(v: View) -> Move | None:
    targets = [val for key, val in sorted(v.fields.items()) if key.startswith("target")]
    targets = [t for t in targets if t != "nothing"]
    for i, name in enumerate(targets):
        node = next((n for n in _label_nodes(v) if n.text == name), None)
        if node is None:
            return None
        move = _click_once(v, f"label:{i}", node)
        if move is not None:
            return move
    return _click_once(v, "submit", v.find(html_id="subbtn"))


_WIDGET_TAGS = {"button": ("button", ""), "textarea": ("textarea", ""), "text": ("input", "text")}


@_plan("click-widget")
def _click_widget(v: View) -> Move | None:
    target = v.fields.get("target", "")
    tag, kind = _WIDGET_TAGS.get(target, ("input", target))
    for n in v.nodes:
        if n.tag == tag and (not kind or n.type == kind or (kind == "text" and n.type == "input")):
            return _click_once(v, "widget", n)
    return None


@_plan("click-collapsible")
def _click_collapsible(v: View) -> Move | None:
    if not v.memory.get("header"):
        header = next((n for n in v.nodes if n.tag == "h3"), None)
        return _click_once(v, "header", header)
    submit = v.find(html_id="subbtn")
    box = submit.box if submit is not None else None
    settled = box is not None and v.memory.get("last") == box
    v.memory["last"] = box
    if not settled:
        return Wait()  # the section slides open: click once the button stops moving
    return _click_once(v, "submit", submit)


# -- our device -------------------------------------------------------------------------------
def view_of(obs: Observation, memory: dict[str, Any] | None = None) -> View:
    """A `View` of one of our observations."""
    nodes = []
    for e in obs.elements:
        a = e.attrs
        nodes.append(
            Node(
                tag=str(a.get("tag", e.role)),
                text=e.text,
                value=e.value,
                html_id=str(a.get("id", "")),
                classes=str(a.get("class", "")),
                box=e.bbox,
                type=str(a.get("type", "")).lower() if a.get("tag") == "input" else "",
                focused=e.focused,
            )
        )
    fields = dict(obs.extras.get("fields") or {})
    return View(obs.instruction, fields, nodes, memory if memory is not None else {})


def to_action(move: Move | None, screen_size: tuple[int, int]) -> Action:
    """A plan's move as one of our actions (None: the plan is stuck -> no-op invalid)."""
    if isinstance(move, Click):
        w, h = screen_size
        return Action.tap(min(max(move.x / w, 0.0), 1.0), min(max(move.y / h, 0.0), 1.0))
    if isinstance(move, Type):
        return Action.type_text(move.text)
    if isinstance(move, Enter):
        return Action.enter()
    if isinstance(move, Wait):
        return Action.invalid("", "oracle waits")
    return Action.invalid("", "oracle has no move")


class MiniWoBOracle:
    """Runs a task's plan on our observations (one instance per device/episode stream)."""

    def __init__(self, task: str) -> None:
        name = task.split("/", 1)[-1]
        if name not in PLANS:
            raise KeyError(f"no oracle plan for MiniWoB task {name!r}; have {sorted(PLANS)}")
        self.plan = PLANS[name]
        self.memory: dict[str, Any] = {}

    def act(self, obs: Observation) -> Action:
        """The next action (a `Wait` sleeps here, then returns a no-op)."""
        if obs.step == 0:
            self.memory = {}
        move = self.plan(view_of(obs, self.memory))
        if isinstance(move, Wait):
            time.sleep(move.seconds)
        return to_action(move, obs.screen_size)
