"""Solvers that type: instruction spans, page text, computed text, and Enter."""

from __future__ import annotations

import re

from devicerl.agents.capabilities import ActionKind
from devicerl.records import Observation
from reach_solvers.kit import (
    Plan,
    enter,
    field,
    find,
    find_all,
    quoted,
    solver,
    tap,
    type_text,
)

TAP = ActionKind.TAP
INSTR, PAGE = ActionKind.TYPE_INSTRUCTION, ActionKind.TYPE_PAGE
COMPUTED, ENTER = ActionKind.TYPE_COMPUTED, ActionKind.ENTER


def _fill(
    obs: Observation,
    entries: list[tuple[int | str, str]],
    submit: str = "Submit",
    submit_role: str = "button",
) -> Plan:
    """Tap each text field (its index among text fields, or its tag), type its text, tap
    ``submit`` (an element of ``submit_role``)."""
    for which, text in entries:
        boxes = (
            find_all(obs, tag=which) if isinstance(which, str) else find_all(obs, role="textbox")
        )
        obs = yield tap(obs, boxes[0] if isinstance(which, str) else boxes[which])
        obs = yield type_text(text)
    yield tap(obs, find(obs, role=submit_role, text=submit))


@solver("enter-text", "enter-text-dynamic", kinds=(TAP, INSTR))
def enter_text(obs: Observation) -> Plan:
    yield from _fill(obs, [(0, field(obs, "target") or quoted(obs.instruction)[0])])


@solver("enter-password", kinds=(TAP, INSTR))
def enter_password(obs: Observation) -> Plan:
    password = quoted(obs.instruction)[0]
    yield from _fill(obs, [(0, password), (1, password)])


@solver("login-user", kinds=(TAP, INSTR))
def login_user(obs: Observation) -> Plan:
    user, password = quoted(obs.instruction)[:2]
    yield from _fill(obs, [(0, user), (1, password)], submit="Login")


@solver("multi-orderings", kinds=(TAP, INSTR))
def multi_orderings(obs: Observation) -> Plan:
    """Three boxes in a shuffled order, each labelled on its row (Genre, Director, Year)."""
    match = re.search(r"Search for (\w+) movies directed by (\w+) from year (\d+)", obs.instruction)
    if match is None:
        raise LookupError(f"no query in {obs.instruction!r}")
    value = dict(zip(("Genre", "Director", "Year"), match.groups()))
    entries: list[tuple[int | str, str]] = []
    for i, box in enumerate(find_all(obs, role="textbox")):
        label = min(
            find_all(obs, role="columnheader"), key=lambda h: abs(h.center[1] - box.center[1])
        )
        entries.append((i, value[label.text]))
    yield from _fill(obs, entries, submit_role="group")  # the Submit of this form is a <div>


@solver("search-engine", kinds=(TAP, INSTR))
def search_engine(obs: Observation) -> Plan:
    """Search the quoted name, turn to the result's page (3 per page), tap the k-th result."""
    match = re.search(r"the (\d+)(?:st|nd|rd|th) search result", obs.instruction)
    if match is None:
        raise LookupError(f"no rank in {obs.instruction!r}")
    rank = int(match.group(1)) - 1
    obs = yield tap(obs, find(obs, role="textbox"))
    obs = yield type_text(quoted(obs.instruction)[0])
    obs = yield tap(obs, find(obs, role="button", text="Search"))
    if rank >= 3:
        obs = yield tap(obs, find(obs, role="link", text=str(rank // 3 + 1)))
    results = find_all(obs, role="link", where=lambda e: e.attrs.get("class") == "search-title")
    yield tap(obs, results[rank % 3])


@solver("enter-date", "enter-time", kinds=(TAP, INSTR))
def enter_date(obs: Observation) -> Plan:
    match = re.search(r"Enter (.+?) as the", obs.instruction)
    if match is None:
        raise LookupError(f"no date/time in {obs.instruction!r}")
    yield from _fill(obs, [(0, match.group(1))])


@solver("enter-text-2", kinds=(TAP, COMPUTED))
def enter_text_2(obs: Observation) -> Plan:
    text = quoted(obs.instruction)[0]
    text = text.upper() if "upper case" in obs.instruction else text.lower()
    yield from _fill(obs, [(0, text)])


def _number(text: str) -> str:
    return str(int(text)) if float(text).is_integer() else str(text)


@solver("simple-arithmetic", kinds=(TAP, COMPUTED))
def simple_arithmetic(obs: Observation) -> Plan:
    problem = find(obs, where=lambda e: re.match(r"-?\d+ [-+x] -?\d+ =", e.text) is not None)
    a, op, b = re.match(r"(-?\d+) ([-+x]) (-?\d+)", problem.text).groups()
    x, y = int(a), int(b)
    answer = x + y if op == "+" else x - y if op == "-" else x * y
    yield from _fill(obs, [(0, str(answer))])


@solver("simple-algebra", kinds=(TAP, COMPUTED))
def simple_algebra(obs: Observation) -> Plan:
    problem = find(obs, where=lambda e: "x" in e.text and "=" in e.text and e.text != "x =")
    # forms: "a + x = c", "x + a = c", "a - x = c", "x - a = c"
    m = re.match(r"\s*(-?\d+|x)\s*([-+])\s*(-?\d+|x)\s*=\s*(-?\d+)", problem.text)
    if m is None:
        raise LookupError(f"cannot read {problem.text!r}")
    left, op, right, total = m.groups()
    c = int(total)
    if left == "x":
        x = c - int(right) if op == "+" else c + int(right)
    else:
        x = c - int(left) if op == "+" else int(left) - c
    yield from _fill(obs, [(0, str(x))])


@solver("find-word", kinds=(TAP, PAGE))
def find_word(obs: Observation) -> Plan:
    index = int(re.search(r"the (\d+)\w\w word", obs.instruction).group(1)) - 1
    para = find(obs, role="paragraph")
    yield from _fill(obs, [(0, re.sub(r"[^a-zA-Z]", "", para.text.split()[index]))])


@solver("copy-paste", kinds=(TAP, PAGE))
def copy_paste(obs: Observation) -> Plan:
    yield from _fill(obs, [("input", find(obs, tag="textarea").value)])


@solver("copy-paste-2", kinds=(TAP, PAGE))
def copy_paste_2(obs: Observation) -> Plan:
    areas = find_all(obs, tag="textarea")
    index = int(field(obs, "target") or 1) - 1
    yield from _fill(obs, [("input", areas[index].value)])


@solver("read-table", kinds=(TAP, PAGE))
def read_table(obs: Observation) -> Plan:
    cells = find_all(obs, role="cell")
    label = field(obs, "target")
    value = next(cells[i + 1].text for i, c in enumerate(cells[:-1]) if c.text == label)
    yield from _fill(obs, [(0, value)])


@solver("text-transform", kinds=(TAP, PAGE))
def text_transform(obs: Observation) -> Plan:
    field_box = find(obs, role="textbox")
    chars = find_all(obs, role="text", where=lambda e: e.bbox[3] <= field_box.bbox[1] + 1)
    chars.sort(key=lambda e: e.bbox[0])
    yield from _fill(obs, [(0, "".join(e.text for e in chars))])


def _terminal_files(obs: Observation) -> list[str]:
    lines = [e.text for e in find_all(obs, where=lambda e: e.attrs.get("class") == "output")]
    return lines[-1].split() if lines else []


@solver("terminal", kinds=(TAP, COMPUTED, ENTER))
def terminal(obs: Observation) -> Plan:
    goal = obs.instruction
    obs = yield tap(obs, find(obs, where=lambda e: e.attrs.get("id") == "terminal"))
    obs = yield type_text("ls")
    obs = yield enter()
    files = _terminal_files(obs)
    ext = re.search(r"extension (\.[\w.]*\w)", goal)
    if ext:
        chosen = [f for f in files if f.endswith(ext.group(1))]
    elif "no file extension" in goal:
        chosen = [f for f in files if "." not in f]
    else:
        chosen = [f for f in files if f in goal]
    if not chosen:
        raise LookupError(f"no file in {files} for {goal!r}")
    obs = yield type_text(f"rm {chosen[0]}")
    yield enter()
