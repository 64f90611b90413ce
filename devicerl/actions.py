"""The action space as one `Action` type, with JSON and AutoUI text codecs.

AitW's seven types (dual-point gestures, typing, back / home / enter, complete, impossible) and
the four AndroidWorld and AndroidControl add: a long press at a point (held ``duration_s``
seconds), opening an app by name, waiting ``duration_s`` seconds, and answering the user with
text (recorded, ends nothing; the agent still says complete).

Coordinates are normalised to [0, 1] and stored as (x, y). The AutoUI text format writes points
as ``[y, x]``; the codec converts. AutoUI has no spelling for the four newer types: the codec
writes them in the same layout with one extra key (``"duration"`` or ``"app_name"``, see
`format_autoui`). `parse_autoui` never raises: any string becomes an `Action`, an
`ActionType.INVALID` one (with the raw text and the reason) when it cannot be understood.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

from devicerl.errors import DataError

#: Two points closer than this (normalised Euclidean distance) form a tap; AitW uses 0.04.
TAP_DISTANCE_THRESHOLD = 0.04
#: A long press held for no duration given, and a wait of no duration given: AndroidWorld's
#: (``input swipe x y x y 1000``; ``time.sleep(1.0)``).
DEFAULT_PRESS_S = 1.0
DEFAULT_WAIT_S = 1.0
#: The longest long press or wait: a step must stay well inside the devices' step deadlines.
MAX_DURATION_S = 10.0
#: The longest app name.
MAX_APP_NAME = 100

Point = tuple[float, float]


class ActionType(str, Enum):
    """Kinds of action. Values are the AutoUI spellings (and the same style for the newer
    types). New members go after the last valid one: `VALID_TYPES` indexes them in order."""

    DUAL_POINT = "DUAL_POINT"
    TYPE = "TYPE"
    PRESS_BACK = "PRESS_BACK"
    PRESS_HOME = "PRESS_HOME"
    PRESS_ENTER = "PRESS_ENTER"
    STATUS_TASK_COMPLETE = "STATUS_TASK_COMPLETE"
    STATUS_TASK_IMPOSSIBLE = "STATUS_TASK_IMPOSSIBLE"
    LONG_PRESS = "LONG_PRESS"
    OPEN_APP = "OPEN_APP"
    WAIT = "WAIT"
    ANSWER = "ANSWER"
    INVALID = "INVALID"


#: Types whose action ends the episode by the agent's own decision.
TERMINAL_TYPES = frozenset({ActionType.STATUS_TASK_COMPLETE, ActionType.STATUS_TASK_IMPOSSIBLE})
#: Types with a point (``touch``), with text (``text``) and with a duration (``duration_s``).
POINT_TYPES = frozenset({ActionType.DUAL_POINT, ActionType.LONG_PRESS})
TEXT_TYPES = frozenset({ActionType.TYPE, ActionType.ANSWER})
DURATION_TYPES = frozenset({ActionType.LONG_PRESS, ActionType.WAIT})

#: Every valid action type, in declaration order (AitW's seven first, so their indices hold).
VALID_TYPES: tuple[ActionType, ...] = tuple(t for t in ActionType if t is not ActionType.INVALID)

#: AitW's seven action types in a frozen order: the class indices of the small agent's type head
#: and of its featurizer's last-action columns, so saved agents keep their shapes and meaning
#: whatever types join `ActionType` later.
AITW_TYPES: tuple[ActionType, ...] = (
    ActionType.DUAL_POINT,
    ActionType.TYPE,
    ActionType.PRESS_BACK,
    ActionType.PRESS_HOME,
    ActionType.PRESS_ENTER,
    ActionType.STATUS_TASK_COMPLETE,
    ActionType.STATUS_TASK_IMPOSSIBLE,
)


def _check_point(name: str, p: Any) -> Point:
    try:
        x, y = (float(p[0]), float(p[1]))
        if len(p) != 2:
            raise ValueError
    except (TypeError, ValueError, IndexError):
        raise ValueError(f"{name} must be an (x, y) pair, got {p!r}") from None
    if not (math.isfinite(x) and math.isfinite(y) and 0.0 <= x <= 1.0 and 0.0 <= y <= 1.0):
        raise ValueError(f"{name} {p!r} is outside the normalised screen [0, 1] x [0, 1]")
    return (x, y)


def _check_duration(kind: ActionType, d: Any) -> float:
    if isinstance(d, bool) or not isinstance(d, (int, float)):
        raise ValueError(f"{kind.value} duration_s must be a number of seconds, got {d!r}")
    if not (math.isfinite(d) and 0.0 < d <= MAX_DURATION_S):
        raise ValueError(
            f"{kind.value} duration_s must be in (0, {MAX_DURATION_S:g}] seconds, got {d!r}"
        )
    return float(d)


def _check_app(app: Any) -> str:
    if not isinstance(app, str):
        raise ValueError(f"OPEN_APP app must be a string, got {app!r}")
    if not app.strip():
        raise ValueError("OPEN_APP needs a non-empty app name")
    if len(app) > MAX_APP_NAME or not app.isprintable():
        raise ValueError(
            f"OPEN_APP app must be one line of at most {MAX_APP_NAME} printable characters, "
            f"got {app[: MAX_APP_NAME + 1]!r}"
        )
    return app


@dataclass(frozen=True)
class Action:
    """One agent action.

    Build actions with the constructors (`Action.tap`, `Action.swipe`, `Action.type_text`,
    `Action.long_press`, `Action.open_app`, `Action.wait`, `Action.answer`, `Action.back`, ...).
    ``touch`` and ``lift`` are (x, y) in [0, 1] (a long press has ``touch`` only); ``text`` is
    the typed text or the answer; ``duration_s`` how long a long press holds or a wait lasts;
    ``app`` the name of the app to open; ``raw`` and ``reason`` keep the model output and the
    parse failure of an invalid action. A field the type does not take is rejected.
    """

    type: ActionType
    touch: Point | None = None
    lift: Point | None = None
    text: str = ""
    raw: str = ""
    reason: str = ""
    duration_s: float | None = None
    app: str = ""

    def __post_init__(self) -> None:
        kind = ActionType(self.type)
        object.__setattr__(self, "type", kind)
        self._check_points(kind)
        if not isinstance(self.text, str):
            raise ValueError("text must be a string")
        if self.text and kind not in TEXT_TYPES:
            raise ValueError(f"{kind.value} takes no text")
        if kind is ActionType.ANSWER and not self.text.strip():
            raise ValueError("ANSWER needs a non-empty text")
        if kind in DURATION_TYPES:
            object.__setattr__(self, "duration_s", _check_duration(kind, self.duration_s))
        elif self.duration_s is not None:
            raise ValueError(f"{kind.value} takes no duration_s")
        if kind is ActionType.OPEN_APP:
            _check_app(self.app)
        elif self.app:
            raise ValueError(f"{kind.value} takes no app")

    def _check_points(self, kind: ActionType) -> None:
        if kind not in POINT_TYPES:
            if self.touch is not None or self.lift is not None:
                raise ValueError(f"{kind.value} takes no points")
            return
        if self.touch is None:
            raise ValueError(f"{kind.value} needs a touch point")
        touch = _check_point("touch", self.touch)
        object.__setattr__(self, "touch", touch)
        if kind is ActionType.LONG_PRESS:
            if self.lift is not None:
                raise ValueError("LONG_PRESS takes one point (touch), no lift")
            return
        lift = touch if self.lift is None else _check_point("lift", self.lift)
        object.__setattr__(self, "lift", lift)

    # -- constructors -----------------------------------------------------------------------
    @classmethod
    def tap(cls, x: float, y: float) -> Action:
        return cls(ActionType.DUAL_POINT, (x, y), (x, y))

    @classmethod
    def swipe(cls, x0: float, y0: float, x1: float, y1: float) -> Action:
        return cls(ActionType.DUAL_POINT, (x0, y0), (x1, y1))

    @classmethod
    def type_text(cls, text: str) -> Action:
        return cls(ActionType.TYPE, text=text)

    @classmethod
    def long_press(cls, x: float, y: float, duration_s: float = DEFAULT_PRESS_S) -> Action:
        """Touch (x, y) and hold it ``duration_s`` seconds before lifting."""
        return cls(ActionType.LONG_PRESS, (x, y), duration_s=duration_s)

    @classmethod
    def open_app(cls, name: str) -> Action:
        """Open the app called ``name`` (as its launcher shows it, or its package name)."""
        return cls(ActionType.OPEN_APP, app=name)

    @classmethod
    def wait(cls, seconds: float = DEFAULT_WAIT_S) -> Action:
        """Do nothing for ``seconds``, then observe (a page or app still loading)."""
        return cls(ActionType.WAIT, duration_s=seconds)

    @classmethod
    def answer(cls, text: str) -> Action:
        """Tell the user ``text`` (a task that asks for information). It ends nothing: the
        last answer of an episode is the one its checker and judge read."""
        return cls(ActionType.ANSWER, text=text)

    @classmethod
    def back(cls) -> Action:
        return cls(ActionType.PRESS_BACK)

    @classmethod
    def home(cls) -> Action:
        return cls(ActionType.PRESS_HOME)

    @classmethod
    def enter(cls) -> Action:
        return cls(ActionType.PRESS_ENTER)

    @classmethod
    def complete(cls) -> Action:
        return cls(ActionType.STATUS_TASK_COMPLETE)

    @classmethod
    def impossible(cls) -> Action:
        return cls(ActionType.STATUS_TASK_IMPOSSIBLE)

    @classmethod
    def invalid(cls, raw: str, reason: str) -> Action:
        return cls(ActionType.INVALID, raw=raw, reason=reason)

    # -- properties -------------------------------------------------------------------------
    @property
    def is_tap(self) -> bool:
        """A dual-point gesture whose points are within `TAP_DISTANCE_THRESHOLD`."""
        if self.type is not ActionType.DUAL_POINT:
            return False
        assert self.touch is not None and self.lift is not None
        return math.dist(self.touch, self.lift) <= TAP_DISTANCE_THRESHOLD

    @property
    def is_swipe(self) -> bool:
        return self.type is ActionType.DUAL_POINT and not self.is_tap

    @property
    def is_terminal(self) -> bool:
        """The agent declares the episode over (task complete or impossible)."""
        return self.type in TERMINAL_TYPES

    @property
    def is_invalid(self) -> bool:
        return self.type is ActionType.INVALID

    @property
    def swipe_direction(self) -> str | None:
        """'up', 'down', 'left' or 'right' (the finger's motion) for a swipe, else None."""
        if not self.is_swipe:
            return None
        assert self.touch is not None and self.lift is not None
        dx, dy = self.lift[0] - self.touch[0], self.lift[1] - self.touch[1]
        if abs(dx) >= abs(dy):
            return "right" if dx > 0 else "left"
        return "down" if dy > 0 else "up"

    def describe(self) -> str:
        """A short human-readable form, for logs, viewers and judges."""
        kind = self.type
        if kind is ActionType.DUAL_POINT:
            assert self.touch is not None and self.lift is not None
            if self.is_tap:
                return f"tap({self.touch[0]:.3f}, {self.touch[1]:.3f})"
            return (
                f"swipe({self.touch[0]:.3f}, {self.touch[1]:.3f} -> "
                f"{self.lift[0]:.3f}, {self.lift[1]:.3f})"
            )
        if kind is ActionType.LONG_PRESS:
            assert self.touch is not None
            return f"long_press({self.touch[0]:.3f}, {self.touch[1]:.3f}, {self.duration_s:g} s)"
        if kind is ActionType.TYPE:
            return f"type({self.text!r})"
        if kind is ActionType.ANSWER:
            return f"answer({self.text!r})"
        if kind is ActionType.WAIT:
            return f"wait({self.duration_s:g} s)"
        if kind is ActionType.OPEN_APP:
            return f"open_app({self.app!r})"
        if kind is ActionType.INVALID:
            return f"invalid({self.reason})"
        return kind.value.lower()

    # -- JSON codec (lossless) ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The action as JSON-ready data: ``type`` and the fields its type takes (a record of
        one of AitW's seven types has the same keys, in the same order, as before the newer
        types existed)."""
        d: dict[str, Any] = {"type": self.type.value}
        if self.touch is not None:
            d["touch"] = list(self.touch)
            if self.type is ActionType.DUAL_POINT:
                d["lift"] = list(self.lift) if self.lift is not None else list(self.touch)
        if self.type in TEXT_TYPES:
            d["text"] = self.text
        if self.duration_s is not None:
            d["duration_s"] = self.duration_s
        if self.type is ActionType.OPEN_APP:
            d["app"] = self.app
        if self.type is ActionType.INVALID:
            d["raw"] = self.raw
            d["reason"] = self.reason
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Action:
        """Inverse of `to_dict`. Raises `DataError` naming the problem on malformed data."""
        try:
            kind = ActionType(d["type"])
            touch = tuple(d["touch"]) if d.get("touch") is not None else None
            lift = tuple(d["lift"]) if d.get("lift") is not None else None
            return cls(
                kind,
                touch,  # type: ignore[arg-type]
                lift,  # type: ignore[arg-type]
                text=d.get("text", ""),
                raw=d.get("raw", ""),
                reason=d.get("reason", ""),
                duration_s=d.get("duration_s"),
                app=d.get("app", ""),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise DataError(f"malformed action record {d!r}: {e}") from None

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_json(cls, s: str) -> Action:
        try:
            d = json.loads(s)
        except json.JSONDecodeError as e:
            raise DataError(f"malformed action JSON {s[:80]!r}: {e}") from None
        if not isinstance(d, dict):
            raise DataError(f"malformed action JSON {s[:80]!r}: not an object")
        return cls.from_dict(d)


# -- AutoUI text codec ------------------------------------------------------------------------
_NO_POINT = "[-1.0, -1.0]"


def _fmt_coord(v: float, precision: int | None) -> str:
    return repr(float(v)) if precision is None else f"{v:.{precision}f}"


def _fmt_point(p: Point | None, precision: int | None) -> str:
    if p is None:
        return _NO_POINT
    x, y = p
    return f"[{_fmt_coord(y, precision)}, {_fmt_coord(x, precision)}]"


def _extension(action: Action) -> str:
    """The key a newer type adds to AutoUI's four (written before ``typed_text``, which stays
    last so unescaped quotes in typed text are still read right)."""
    if action.duration_s is not None:
        return f'"duration": {action.duration_s!r}, '
    if action.type is ActionType.OPEN_APP:
        return f'"app_name": {json.dumps(action.app, ensure_ascii=False)}, '
    return ""


def format_autoui(action: Action, plan: str | None = None, precision: int | None = None) -> str:
    """Write an action in AutoUI's text format (points as [y, x]).

    ``precision=None`` writes coordinates exactly (lossless round-trip); an int rounds them to
    that many decimals (shorter targets for a text model). Typed text is written as a JSON string
    literal, so quotes, commas, brackets, newlines and any unicode survive.
    An invalid action is written back as its raw text.

    The newer types, which AutoUI never had, keep its layout and add one key before
    ``typed_text``: LONG_PRESS its point as ``touch_point`` and ``"duration": SECONDS``; WAIT
    ``"duration": SECONDS``; OPEN_APP ``"app_name": "NAME"`` (a JSON string); ANSWER writes its
    text as ``typed_text``. Text written for AitW's seven types is unchanged.
    """
    if action.type is ActionType.INVALID:
        return action.raw
    if plan is None:
        plan = f"[{action.type.value}]"
    return (
        f"Action Plan: {plan} ; Action Decision: "
        f'"action_type": "{action.type.value}", '
        f'"touch_point": "{_fmt_point(action.touch, precision)}", '
        f'"lift_point": "{_fmt_point(action.lift, precision)}", '
        + _extension(action)
        + f'"typed_text": {json.dumps(action.text, ensure_ascii=False)}'
    )


_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_TYPE_RE = re.compile(r"""["']?action_type["']?\s*:\s*["']?([A-Za-z_ ]+)""", re.IGNORECASE)
_TEXT_KEY_RE = re.compile(r"""["']?typed_text["']?\s*:\s*""", re.IGNORECASE)
_APP_KEY_RE = re.compile(r"""["']?\bapp(?:_name)?\b["']?\s*:\s*""", re.IGNORECASE)
_DURATION_RE = re.compile(
    rf"""["']?\b(?:duration|duration_s|time|seconds)\b["']?\s*:\s*["']?({_NUM})""", re.IGNORECASE
)
_ALIASES = {
    "CLICK": ActionType.DUAL_POINT,
    "TAP": ActionType.DUAL_POINT,
    "SWIPE": ActionType.DUAL_POINT,
    "SCROLL": ActionType.DUAL_POINT,
    "TYPE_TEXT": ActionType.TYPE,
    "INPUT": ActionType.TYPE,
    "BACK": ActionType.PRESS_BACK,
    "HOME": ActionType.PRESS_HOME,
    "ENTER": ActionType.PRESS_ENTER,
    "TASK_COMPLETE": ActionType.STATUS_TASK_COMPLETE,
    "COMPLETE": ActionType.STATUS_TASK_COMPLETE,
    "TASK_IMPOSSIBLE": ActionType.STATUS_TASK_IMPOSSIBLE,
    "IMPOSSIBLE": ActionType.STATUS_TASK_IMPOSSIBLE,
    "LONG_CLICK": ActionType.LONG_PRESS,
    "OPEN": ActionType.OPEN_APP,
    "LAUNCH_APP": ActionType.OPEN_APP,
}


def _point_re(key: str) -> re.Pattern[str]:
    return re.compile(
        rf"""["']?{key}["']?\s*:\s*["']?\[\s*({_NUM})\s*,\s*({_NUM})\s*\]""", re.IGNORECASE
    )


_TOUCH_RE = _point_re("touch_point")
_LIFT_RE = _point_re("lift_point")


def _parse_point(text: str, pattern: re.Pattern[str]) -> tuple[Point | None, str]:
    """Returns ((x, y), "") or (None, reason). Text holds [y, x]."""
    m = pattern.search(text)
    if m is None:
        return None, "missing"
    y, x = float(m.group(1)), float(m.group(2))
    if not (math.isfinite(x) and math.isfinite(y)):
        return None, f"non-finite coordinate in {m.group(0)!r}"
    if not (0.0 <= x <= 1.0 and 0.0 <= y <= 1.0):
        return None, f"coordinate outside [0, 1] in {m.group(0)!r}"
    return (x, y), ""


def _parse_typed_text(text: str) -> str | None:
    m = _TEXT_KEY_RE.search(text)
    if m is None:
        return None
    rest = text[m.end() :]
    quote = rest[:1]
    if quote not in ('"', "'"):
        return rest.strip()
    if quote == '"':
        try:
            value, end = json.JSONDecoder().raw_decode(rest)
        except json.JSONDecodeError:
            value, end = None, 0
        # Accept the JSON reading only when nothing but closing punctuation follows it; otherwise
        # the model wrote unescaped quotes and the last quote is the real end.
        if isinstance(value, str) and rest[end:].strip(" \t\r\n}],;") == "":
            return value
    last = rest.rfind(quote)
    return rest[1:last] if last > 0 else rest[1:]


def _parse_app_name(text: str) -> str | None:
    """The ``app_name`` value: a JSON string, a single-quoted one, or bare up to a comma."""
    m = _APP_KEY_RE.search(text)
    if m is None:
        return None
    rest = text[m.end() :]
    if rest.startswith('"'):
        try:
            value, _ = json.JSONDecoder().raw_decode(rest)
            return value if isinstance(value, str) else None
        except json.JSONDecodeError:
            return None
    if rest.startswith("'"):
        end = rest.find("'", 1)
        return rest[1:end] if end > 0 else None
    return re.split(r"[,}\n]", rest, maxsplit=1)[0].strip()


def _parse_duration(text: str, default: float) -> float:
    m = _DURATION_RE.search(text)
    return float(m.group(1)) if m else default


def parse_autoui(text: str) -> Action:
    """Parse AutoUI-format model output into an `Action`. Never raises.

    Accepts the AutoUI format (with `format_autoui`'s keys for the newer types), loose variants
    (single quotes, JSON objects with list points, unescaped typed text) and common aliases
    (CLICK, TAP, BACK, LONG_CLICK, OPEN, ...). A LONG_PRESS or WAIT without a duration gets
    `DEFAULT_PRESS_S` / `DEFAULT_WAIT_S`. Anything else becomes an invalid action carrying the
    raw text and the reason.
    """
    try:
        return _parse_autoui(text)
    except Exception as e:  # defensive: model output must never crash a run
        return Action.invalid(str(text), f"parser error: {type(e).__name__}: {e}")


def _parse_autoui(text: str) -> Action:
    if not isinstance(text, str):
        return Action.invalid(repr(text), "model output is not a string")
    if not text.strip():
        return Action.invalid(text, "empty output")
    idx = text.find("Action Decision:")
    body = text[idx + len("Action Decision:") :] if idx >= 0 else text
    m = _TYPE_RE.search(body)
    if m is None:
        return Action.invalid(text, "no action_type found")
    name = m.group(1).strip().upper().replace(" ", "_")
    try:
        kind = ActionType(name)
    except ValueError:
        kind = _ALIASES.get(name)  # type: ignore[assignment]
    if kind is None or kind is ActionType.INVALID:
        return Action.invalid(text, f"unknown action_type {m.group(1).strip()!r}")
    try:
        return _parse_kind(kind, body, text)
    except ValueError as e:  # a field the type needs is out of its bounds
        return Action.invalid(text, str(e))


def _parse_kind(kind: ActionType, body: str, text: str) -> Action:
    """The action of type ``kind`` from the text after its ``action_type``."""
    if kind in POINT_TYPES:
        touch, why = _parse_point(body, _TOUCH_RE)
        if touch is None:
            return Action.invalid(text, f"{kind.value} touch_point {why}")
        if kind is ActionType.LONG_PRESS:
            return Action.long_press(*touch, _parse_duration(body, DEFAULT_PRESS_S))
        lift, why = _parse_point(body, _LIFT_RE)
        if lift is None and why != "missing":
            return Action.invalid(text, f"DUAL_POINT lift_point {why}")
        return Action(ActionType.DUAL_POINT, touch, lift or touch)
    if kind in TEXT_TYPES:
        typed = _parse_typed_text(body)
        if typed is None:
            return Action.invalid(text, f"{kind.value} without typed_text")
        return Action(kind, text=typed)
    if kind is ActionType.WAIT:
        return Action.wait(_parse_duration(body, DEFAULT_WAIT_S))
    if kind is ActionType.OPEN_APP:
        app = _parse_app_name(body)
        if app is None:
            return Action.invalid(text, "OPEN_APP without app_name")
        return Action.open_app(app)
    return Action(kind)
