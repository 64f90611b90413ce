"""Function-call action texts (``click(start_box='(10,20)')``, ``pyautogui.click(x=0.5, y=0.2)``):
finding the first call of a known name in a model's output and reading its arguments as Python
literals (`ast.literal_eval`: nothing is ever evaluated), and writing string arguments in the
single-quoted form these families were trained on."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Call:
    """One function call read from text: its name, positional and keyword arguments."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def arg(self, key: str, position: int = 0) -> Any:
        """The keyword argument ``key``, else the positional one at ``position``; None if
        neither was given."""
        if key in self.kwargs:
            return self.kwargs[key]
        return self.args[position] if position < len(self.args) else None


def quote(text: str) -> str:
    """``text`` as a single-quoted Python string literal (backslashes, quotes, line breaks and
    NUL, which Python source cannot hold, escaped), which `ast.literal_eval` reads back
    exactly."""
    body = text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\r", "\\r")
    return "'" + body.replace("\0", "\\x00") + "'"


def _closing(text: str, start: int) -> int:
    """Index of the parenthesis closing the one at ``start`` (quotes and nesting respected),
    or -1."""
    depth, quote_char, i = 0, "", start
    while i < len(text):
        c = text[i]
        if quote_char:
            if c == "\\":
                i += 1
            elif c == quote_char:
                quote_char = ""
        elif c in "'\"":
            quote_char = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def find_call(text: str, names: Iterable[str]) -> Call | str:
    """The first call in ``text`` of one of ``names`` (dotted names allowed) with literal
    arguments, or the reason there is none."""
    pattern = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    reason = f"no call of {', '.join(sorted(names))}"
    for m in re.finditer(rf"(?<![\w.])({pattern})\s*\(", text):
        end = _closing(text, m.end() - 1)
        if end < 0:
            reason = f"{m.group(1)}( is never closed"
            continue
        try:
            node = ast.parse("f" + text[m.end() - 1 : end + 1], mode="eval").body
            if not isinstance(node, ast.Call):
                raise ValueError("not a call")
            args = tuple(ast.literal_eval(a) for a in node.args)
            kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
        except (SyntaxError, ValueError, TypeError, RecursionError) as e:
            reason = f"{m.group(1)}(...) has arguments that are not literals ({type(e).__name__})"
            continue
        return Call(m.group(1), args, kwargs)
    return reason
