"""Network allow-list: a page reaches only its allowed hosts; everything else is blocked.

The route is registered with a regular expression that matches only *disallowed* URLs, so
Playwright's driver lets allowed requests through without a round trip to Python; a
disallowed request (HTTP(S) or WebSocket) is aborted and counted. ``data:``, ``blob:`` and
``about:`` URLs never leave the browser and are always allowed; ``file:`` URLs are allowed
only when ``allow_files`` is set (tasks served from disk).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from devicerl.errors import ConfigError

log = logging.getLogger(__name__)

_HOST_RE = re.compile(r"^(\*\.)?[a-z0-9.\-]+(:\d+)?$")


def _host_pattern(entry: str) -> str:
    """``host``, ``host:port`` or ``*.domain`` -> regex for the authority part of a URL."""
    entry = entry.strip().lower()
    if "://" in entry:
        entry = urlsplit(entry).netloc
    if not entry or not _HOST_RE.match(entry):
        raise ConfigError(f"invalid allow-list host {entry!r} (use host, host:port or *.domain)")
    host, _, port = entry.partition(":")
    if host.startswith("*."):
        host_re = r"(?:[a-z0-9\-]+\.)*" + re.escape(host[2:])
    else:
        host_re = re.escape(host)
    port_re = f":{re.escape(port)}" if port else r"(?::\d+)?"
    return host_re + port_re


def blocked_url_regex(allow_hosts: Iterable[str], allow_files: bool = False) -> str:
    """A regex matching every URL that is *not* allowed."""
    hosts = [_host_pattern(h) for h in allow_hosts]
    allowed = [r"data:", r"blob:", r"about:", r"chrome-error:"]
    if allow_files:
        allowed.append(r"file:")
    if hosts:
        allowed.append(r"(?:https?|wss?)://(?:[^@/]*@)?(?:" + "|".join(hosts) + r")(?:[/?#]|$)")
    return r"^(?!(?:" + "|".join(allowed) + r"))"


class NetworkGuard:
    """Blocks and counts disallowed requests of one browser context."""

    def __init__(self, allow_hosts: Iterable[str], allow_files: bool = False) -> None:
        self.allow_hosts = sorted(set(allow_hosts))
        self.allow_files = allow_files
        self.pattern = re.compile(blocked_url_regex(self.allow_hosts, allow_files), re.I)
        self.blocked = 0
        self.hosts: Counter[str] = Counter()
        self._lock = threading.Lock()

    async def install(self, context: Any) -> None:
        """Route the context's requests (and WebSockets, when Playwright supports it)."""
        await context.route(self.pattern, self._on_request)
        with contextlib.suppress(AttributeError):
            await context.route_web_socket(self.pattern, self._on_websocket)

    def _count(self, url: str) -> None:
        with self._lock:
            self.blocked += 1
            self.hosts[urlsplit(url).netloc or url.split(":", 1)[0]] += 1
        log.debug("blocked request to %s", url)

    async def _on_request(self, route: Any) -> None:
        self._count(route.request.url)
        with contextlib.suppress(Exception):
            await route.abort("blockedbyclient")

    async def _on_websocket(self, ws: Any) -> None:
        self._count(ws.url)
        with contextlib.suppress(Exception):
            await ws.close(code=1008, reason="blocked by devicerl allow-list")

    def snapshot(self) -> tuple[int, dict[str, int]]:
        with self._lock:
            return self.blocked, dict(self.hosts)

    def reset(self) -> None:
        with self._lock:
            self.blocked = 0
            self.hosts.clear()
