"""One scrubber for every string that leaves a run: store rows, logs, reports, error messages.

Secrets come only from environment variables. `scrub(text)` removes from ``text``:

- the values of the variables in use: every variable a config names through a ``*_env`` field
  (`register`, called when a config is loaded and when a client is built) and every variable
  whose own name looks secret (``*API_KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``);
- what follows an ``Authorization`` or ``api-key`` header and a ``Bearer`` token, even when the
  value is unknown to us (a server that echoes a header it was sent).

Variable *names* (``api_key_env: GEMINI_API_KEY``) are configuration and are kept as they are.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

#: What a removed secret is replaced with.
MASK = "***"

#: Variable (or config key) names whose values are secrets. ``token`` counts only as the name's
#: last word (``HF_TOKEN``, ``access_token``), so counts such as ``max_tokens`` stay config.
SECRET_NAME = re.compile(r"(api_?key|secret|passw(or)?d|credential|(^|[_.-])token$)", re.IGNORECASE)
#: Values shorter than this are not scrubbed (``1``, ``true``: too common to be a secret).
MIN_SECRET_LEN = 6

_HEADERS = re.compile(
    r"""(?ix)
    (?P<head>
        \b(?:proxy-)?authorization["']?\s*[:=]\s*["']?(?:(?:bearer|basic|token)\s+)?
      | \b(?:x-)?api[-_]?key["']?\s*[:=]\s*["']?
      | \bbearer\s+
    )
    (?!(?:bearer|basic|token)\b|\*\*\*)
    (?P<value>[^\s"',;}&<>\\]{4,})
    """
)

_registered: set[str] = set()
_lock = threading.Lock()


#: What an environment variable's name may look like (POSIX: letters, digits, underscores).
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def is_env_name(text: str) -> bool:
    """Whether ``text`` can name an environment variable (a key pasted in its place cannot:
    keys hold ``-``, ``.`` or start with a digit, and are refused before they are stored)."""
    return bool(ENV_NAME.fullmatch(text))


def register(*names: str) -> None:
    """Mark environment variables (by name) as holding secrets, e.g. a client's ``api_key_env``."""
    with _lock:
        _registered.update(n for n in names if n)


def registered() -> frozenset[str]:
    with _lock:
        return frozenset(_registered)


def is_secret_name(name: str) -> bool:
    """True for a name whose *value* is secret (``api_key``, ``HF_TOKEN``); a name ending in
    ``_env`` names a variable and is not itself secret."""
    return bool(SECRET_NAME.search(name)) and not name.lower().endswith("_env")


def secret_values() -> list[str]:
    """The values to remove: registered variables and variables with secret-looking names."""
    names = registered()
    values = {
        v
        for k, v in os.environ.items()
        if (k in names or is_secret_name(k)) and len(v.strip()) >= MIN_SECRET_LEN
    }
    return sorted(values, key=len, reverse=True)  # longest first: no partial leftovers


@functools.lru_cache(maxsize=8)
def _values_pattern(values: tuple[str, ...]) -> re.Pattern[str] | None:
    if not values:
        return None
    return re.compile("|".join(re.escape(v) for v in values))


def _mask_header(m: re.Match[str]) -> str:
    return m.group("head") + MASK


def scrubber() -> Callable[[str], str]:
    """A scrub function for the secrets in use now (build once, apply to many strings)."""
    pattern = _values_pattern(tuple(secret_values()))

    def scrub_text(text: str) -> str:
        if not text:
            return text
        if pattern is not None:
            text = pattern.sub(MASK, text)
        return _HEADERS.sub(_mask_header, text)

    return scrub_text


def scrub(text: str) -> str:
    """``text`` with secret values and credential headers replaced by `MASK`."""
    return scrubber()(text)


def scrub_obj(obj: Any, fn: Callable[[str], str] | None = None) -> Any:
    """A copy of ``obj`` (nested dicts, lists, tuples) with every string scrubbed."""
    fn = fn or scrubber()
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: scrub_obj(v, fn) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(scrub_obj(v, fn) for v in obj)
    return obj


class ScrubFilter(logging.Filter):
    """A logging filter that scrubs each record's message (and its traceback text)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: leave it to the handler to report
            return True
        record.msg, record.args = scrub(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub(record.exc_text)
        return True


def install_log_filter(logger: logging.Logger | None = None) -> None:
    """Scrub everything ``logger`` (default: the root logger) hands to its handlers."""
    logger = logger or logging.getLogger()
    for handler in logger.handlers:
        if not any(isinstance(f, ScrubFilter) for f in handler.filters):
            handler.addFilter(ScrubFilter())


class ScrubbedStream(io.TextIOBase):
    """A text stream (stdout, stderr) whose every line passes the scrubber before it reaches
    the stream it wraps: what a command prints cannot carry a secret, whoever prints it.

    Text is held until a line ends or the stream is flushed (progress bars flush after each
    redraw), so a secret printed in several pieces is still seen whole."""

    def __init__(self, stream: Any) -> None:
        super().__init__()
        self.wrapped = stream
        self._pending = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            self._pending += text
            if "\n" in text or len(self._pending) > 1 << 16:
                head, sep, tail = self._pending.rpartition("\n")
                out, self._pending = (head + sep, tail) if sep else (self._pending, "")
                self.wrapped.write(scrub(out))
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self._pending:
                self.wrapped.write(scrub(self._pending))
                self._pending = ""
        self.wrapped.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.wrapped.isatty()

    def fileno(self) -> int:
        return self.wrapped.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.wrapped, "encoding", "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.wrapped, "errors", None)


@contextlib.contextmanager
def scrubbed_streams() -> Iterator[None]:
    """Route ``sys.stdout`` and ``sys.stderr`` through `ScrubbedStream` for the ``with`` body."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = ScrubbedStream(saved[0]), ScrubbedStream(saved[1])
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        sys.stdout, sys.stderr = saved
