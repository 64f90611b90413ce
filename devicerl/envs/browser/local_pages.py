"""Local web pages served on loopback: one HTTP server per folder and process, ref-counted.

Tasks whose page is a file on disk (custom suites, `devicerl.tasks.custom`) run on
``http://127.0.0.1:<port>/<file>`` rather than ``file://``, so pages behave as on a web server
(same origin for their scripts and styles) and the device's network allow-list stays one host.
The server answers only with regular files inside its folder: a path that leaves it (``..``, a
link out) or names a folder is a 404, and there are no directory listings.
"""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class _Handler(SimpleHTTPRequestHandler):
    root: Path

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def translate_path(self, path: str) -> str:
        candidate = Path(super().translate_path(path)).resolve()
        if candidate.is_relative_to(self.root) and candidate.is_file():
            return str(candidate)
        return str(self.root / ".devicerl-not-found")  # answered 404

    def list_directory(self, path: Any) -> None:
        self.send_error(404)
        return None


class PageServer:
    """``PageServer.acquire(folder)`` -> base URL (``http://127.0.0.1:PORT/``); `release` when
    done. Devices of one process share the server of a folder."""

    _lock = threading.Lock()
    _servers: dict[Path, tuple[ThreadingHTTPServer, int]] = {}

    @classmethod
    def acquire(cls, folder: str | Path) -> str:
        root = Path(folder).resolve()
        with cls._lock:
            entry = cls._servers.get(root)
            if entry is None:
                handler = type("Handler", (_Handler,), {"root": root})
                httpd = ThreadingHTTPServer(
                    ("127.0.0.1", 0), functools.partial(handler, directory=str(root))
                )
                httpd.daemon_threads = True
                threading.Thread(
                    target=httpd.serve_forever, name="devicerl-local-pages", daemon=True
                ).start()
                entry = (httpd, 0)
            httpd, refs = entry
            cls._servers[root] = (httpd, refs + 1)
            return f"http://127.0.0.1:{httpd.server_address[1]}/"

    @classmethod
    def release(cls, folder: str | Path) -> None:
        root = Path(folder).resolve()
        with cls._lock:
            entry = cls._servers.get(root)
            if entry is None:
                return
            httpd, refs = entry
            if refs > 1:
                cls._servers[root] = (httpd, refs - 1)
                return
            del cls._servers[root]
        httpd.shutdown()
        httpd.server_close()
