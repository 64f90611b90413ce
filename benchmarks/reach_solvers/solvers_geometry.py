"""Solvers that tap free points, drag, and read colours and shapes from the screenshot."""

from __future__ import annotations

from PIL import ImageColor

from devicerl.actions import Action
from devicerl.agents.capabilities import ActionKind
from devicerl.records import Observation, UIElement
from reach_solvers.kit import (
    Plan,
    drag,
    field,
    find,
    find_all,
    pixel,
    point,
    solver,
    tap,
)

TAP, POINT, DRAG, PIXELS = ActionKind.TAP, ActionKind.POINT, ActionKind.DRAG, ActionKind.PIXELS


def _submit(obs: Observation) -> UIElement:
    return find(obs, role="button", where=lambda e: e.text.lower() == "submit")


@solver("find-midpoint", kinds=(POINT, TAP))
def find_midpoint(obs: Observation) -> Plan:
    a, b = find_all(obs, role="circle")[:2]
    (ax, ay), (bx, by) = a.center, b.center
    obs = yield point(obs, (ax + bx) / 2, (ay + by) / 2)
    yield tap(obs, _submit(obs))


@solver("drag-box", kinds=(DRAG,))
def drag_box(obs: Observation) -> Plan:
    small = find(obs, text="s")
    large = find(obs, text="L")
    obs = yield drag(obs, small.center, large.center)
    yield tap(obs, _submit(obs))


@solver("draw-line", kinds=(DRAG, TAP))
def draw_line(obs: Observation) -> Plan:
    dot = find(obs, role="circle")
    x, y = dot.center
    if field(obs, "direction") == "vertical":
        start, end = (x, y - 30), (x, y + 30)
    else:
        start, end = (x - 30, y), (x + 30, y)
    obs = yield drag(obs, start, end)
    yield tap(obs, _submit(obs))


@solver("highlight-text", kinds=(DRAG, TAP))
def highlight_text(obs: Observation) -> Plan:
    para = find(obs, where=lambda e: e.role in ("group", "paragraph") and bool(e.text))
    left, top, right, bottom = para.bbox
    obs = yield drag(obs, (left + 0.5, top + 3), (right - 0.5, bottom - 2))  # start to end
    yield tap(obs, _submit(obs))


@solver("resize-textarea", kinds=(DRAG, TAP))
def resize_textarea(obs: Observation) -> Plan:
    handle = find(obs, where=lambda e: "ui-resizable-se" in str(e.attrs.get("class", "")))
    x, y = handle.center
    target = field(obs, "target")
    dx = -15 if "width is smaller" in target else 15 if "width is larger" in target else 0
    dy = -15 if "height is smaller" in target else 15 if "height is larger" in target else 0
    obs = yield drag(obs, (x, y), (x + dx, y + dy))
    yield tap(obs, _submit(obs))


def _slider_value(obs: Observation) -> float:
    return float(find(obs, where=lambda e: e.attrs.get("id") == "val").text)


def _slider_parts(obs: Observation) -> tuple[UIElement, UIElement, int]:
    track = find(obs, where=lambda e: "ui-slider" in str(e.attrs.get("class", "")).split())
    handle = find(obs, where=lambda e: "ui-slider-handle" in str(e.attrs.get("class", "")))
    return track, handle, 1 if "ui-slider-vertical" in str(track.attrs.get("class", "")) else 0


@solver("use-slider", kinds=(DRAG, TAP))
def use_slider(obs: Observation) -> Plan:
    """Drags that touch the track away from the handle (the handle jumps under the finger, so
    the value follows the lift point exactly): past both ends, reading the values shown there,
    then to the interpolated position of the target (and again by the error, if any)."""
    want = float(field(obs, "target"))
    track, _, axis = _slider_parts(obs)
    lo, hi = track.bbox[axis], track.bbox[axis + 2]
    across = (track.bbox[1 - axis] + track.bbox[3 - axis]) / 2

    def to(o: Observation, pos: float) -> Action:
        handle = _slider_parts(o)[1].center[axis]
        touch = hi - 2 if abs(handle - lo) < abs(handle - hi) else lo + 2
        start, end = [across, across], [across, across]
        start[axis], end[axis] = touch, pos
        return drag(o, (start[0], start[1]), (end[0], end[1]))

    obs = yield to(obs, lo - 10)
    at_lo = _slider_value(obs)
    obs = yield to(obs, hi + 10)
    at_hi = _slider_value(obs)
    pos = lo + (want - at_lo) / (at_hi - at_lo) * (hi - lo)
    for _ in range(4):
        obs = yield to(obs, pos)
        error = want - _slider_value(obs)
        if error == 0:
            break
        pos += error / (at_hi - at_lo) * (hi - lo)
    yield tap(obs, _submit(obs))


_SHAPE_FILL = {"circle": 0.785, "rectangle": 1.0, "triangle": 0.5}


def _nearest_colour(obs: Observation, els: list[UIElement], name: str) -> UIElement:
    want = ImageColor.getrgb(name)

    def dist(e: UIElement) -> float:
        got = pixel(obs, *e.center)
        return sum((a - b) ** 2 for a, b in zip(got, want))

    return min(els, key=dist)


@solver("click-color", kinds=(TAP, PIXELS))
def click_color(obs: Observation) -> Plan:
    boxes = find_all(obs, where=lambda e: e.attrs.get("class") == "color")
    yield tap(obs, _nearest_colour(obs, boxes, field(obs, "target")))


def _fill_ratio(obs: Observation, el: UIElement) -> float:
    """The fraction of the element's box painted differently from the background (white)."""
    assert obs.screenshot is not None
    left, top, right, bottom = (round(v) for v in el.bbox)
    patch = obs.screenshot[top:bottom, left:right].astype(int)
    painted = (abs(patch - 255).sum(-1) > 60).mean() if patch.size else 0.0
    return float(painted)


@solver("identify-shape", kinds=(TAP, PIXELS))
def identify_shape(obs: Observation) -> Plan:
    buttons = {e.text: e for e in find_all(obs, role="button")}
    figure = find(obs, where=lambda e: e.role != "button" and e.bbox[3] < min(
        b.bbox[1] for b in buttons.values()))  # fmt: skip
    if figure.role == "text":  # a glyph: a letter or a digit
        answer = "Number" if figure.text.isdigit() else "Letter"
    else:
        ratio = _fill_ratio(obs, figure)
        shape = min(_SHAPE_FILL, key=lambda s: abs(_SHAPE_FILL[s] - ratio))
        answer = shape.capitalize()
    yield tap(obs, buttons[answer])
