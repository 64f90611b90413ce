"""`Action`s as Android shell command lines (``input tap/swipe/text/keyevent``).

Points are normalised (x, y) in [0, 1]; they become integer pixels of the device's screen
(clamped to it). A long press is a swipe that does not move, held for its duration (``input
swipe x y x y MS``, as AndroidWorld presses); a wait has no command (the device sleeps); which
app OPEN_APP starts is `devicerl.envs.android.apps`' job.

Typed text goes through two interpreters on the device, and both are handled:
- the shell: every argument is single-quoted (`shlex.quote`), so ``$ ` \\ " ' ; & | < > ( ) *``
  and the like arrive literally;
- ``input text`` itself, which turns ``%s`` into a space (the only way to type a space): spaces
  are sent as ``%s``, and a literal ``%s`` in the text is split over two ``input text`` calls
  (``...%`` then ``s...``) so it is not turned into a space.
Newlines and tabs become ``input keyevent 66`` / ``61`` (ENTER / TAB).

``input text`` can only type what the virtual keyboard's key map has: printable ASCII. Other
text (accents, CJK, emoji, control characters) is sent through ADBKeyboard's broadcast
(``am broadcast -a ADB_INPUT_B64 --es msg <base64 UTF-8>``) when that IME is active on the
device; otherwise the action cannot be performed and the device records it as an invalid
action (a no-op) with the reason.
"""

from __future__ import annotations

import base64
import math
import shlex

from devicerl.actions import Action, ActionType

#: Android key codes of the AitW key actions.
KEYCODES = {ActionType.PRESS_BACK: 4, ActionType.PRESS_HOME: 3, ActionType.PRESS_ENTER: 66}
KEYCODE_ENTER = 66
KEYCODE_TAB = 61
#: The ADBKeyboard input method (https://github.com/senzhk/ADBKeyBoard), as ``ime`` names it.
ADB_KEYBOARD_IME = "com.android.adbkeyboard/.AdbIME"
_KEYED_CHARS = {"\n": KEYCODE_ENTER, "\t": KEYCODE_TAB}


def to_pixels(point: tuple[float, float], size: tuple[int, int]) -> tuple[int, int]:
    """A normalised point as integer pixels inside a ``(width, height)`` screen."""
    w, h = size
    x = min(max(math.floor(point[0] * w + 0.5), 0), w - 1)  # half up, not to even
    y = min(max(math.floor(point[1] * h + 0.5), 0), h - 1)
    return x, y


def untypable(text: str) -> str:
    """The characters of ``text`` that ``input text`` cannot type (in order, deduplicated)."""
    bad = [c for c in text if not (" " <= c <= "~" or c in _KEYED_CHARS or c == "\r")]
    return "".join(dict.fromkeys(bad))


def untypable_reason(text: str) -> str | None:
    """Why ``input text`` cannot type ``text`` (None when it can)."""
    bad = untypable(text)
    if not bad:
        return None
    return (
        f"`input text` cannot type {bad!r}; make ADBKeyboard ({ADB_KEYBOARD_IME}) the active "
        "input method to type non-ASCII text"
    )


def _literal_chunks(segment: str) -> list[str]:
    """``segment`` split so that no chunk contains a literal ``%s`` (``input text`` would turn
    it into a space): ``"a%sb"`` -> ``["a%", "sb"]``."""
    chunks = segment.split("%s")
    out = [chunks[0]]
    for chunk in chunks[1:]:
        out[-1] += "%"
        out.append("s" + chunk)
    return [c for c in out if c]


def text_commands(text: str) -> list[str]:
    """Shell commands that type printable-ASCII ``text`` (see the module doc)."""
    commands: list[str] = []
    segment = ""
    for c in text.replace("\r\n", "\n").replace("\r", "\n") + "\0":
        if c in _KEYED_CHARS or c == "\0":
            for chunk in _literal_chunks(segment):
                commands.append("input text " + shlex.quote(chunk.replace(" ", "%s")))
            segment = ""
            if c != "\0":
                commands.append(f"input keyevent {_KEYED_CHARS[c]}")
        else:
            segment += c
    return commands


def adbkeyboard_command(text: str) -> str:
    """Types any Unicode ``text`` through the ADBKeyboard IME (it must be the active IME)."""
    payload = base64.b64encode(text.encode("utf-8")).decode("ascii")
    return f"am broadcast -a ADB_INPUT_B64 --es msg {payload}"


def action_commands(
    action: Action, size: tuple[int, int], swipe_ms: int = 300, unicode_ime: bool = False
) -> list[str]:
    """The shell commands that perform a valid, non-terminal ``action`` on a screen of
    ``size`` pixels. Raises ValueError for text that cannot be typed (``unicode_ime`` False)."""
    kind = action.type
    if kind is ActionType.DUAL_POINT:
        assert action.touch is not None and action.lift is not None
        x0, y0 = to_pixels(action.touch, size)
        if action.is_tap:
            return [f"input tap {x0} {y0}"]
        x1, y1 = to_pixels(action.lift, size)
        return [f"input swipe {x0} {y0} {x1} {y1} {int(swipe_ms)}"]
    if kind is ActionType.TYPE:
        reason = untypable_reason(action.text)
        if reason is None:
            return text_commands(action.text)
        if unicode_ime:
            return [adbkeyboard_command(action.text)]
        raise ValueError(reason)
    if kind in KEYCODES:
        return [f"input keyevent {KEYCODES[kind]}"]
    if kind is ActionType.LONG_PRESS:
        assert action.touch is not None and action.duration_s is not None
        x, y = to_pixels(action.touch, size)
        return [f"input swipe {x} {y} {x} {y} {max(1, round(action.duration_s * 1000))}"]
    if kind is ActionType.WAIT:
        return []
    raise ValueError(f"{kind.value} is not performed with `input`")
