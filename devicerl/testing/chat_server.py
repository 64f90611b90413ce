"""A real chat-completions HTTP server on loopback that answers from a script.

For tests and dry runs of the API agent and the VLM judge: it speaks the OpenAI
``POST /v1/chat/completions`` schema over real sockets, records every request (time, headers,
body), and can inject faults. A reply is produced by ``responder(body) -> Reply | str``; or
queue scripted replies with `ScriptedChatServer.push` (they are used first, in order).

Reply kinds: ``Reply(text=...)`` (a normal completion), ``Reply(status=429, headers=...)``
(with ``text``: the error body's message),
``Reply(status=500)``, ``Reply(delay_s=5)`` (answers late, to trip client timeouts),
``Reply(garbage=True)`` (HTTP 200 with a body that is not JSON), ``Reply(drop=True)`` (closes
the connection without answering).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    text: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    garbage: bool = False
    drop: bool = False


@dataclass
class RecordedRequest:
    at: float
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


Responder = Callable[[dict[str, Any]], "Reply | str"]


class ScriptedChatServer:
    """``with ScriptedChatServer(responder) as srv: ... srv.base_url ...``"""

    def __init__(self, responder: Responder | None = None, host: str = "127.0.0.1") -> None:
        self.responder = responder or (lambda body: Reply("ok"))
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Reply | str] = deque()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"_unparseable": raw.decode("utf-8", "replace")}
                server._record(self.path, dict(self.headers), body)
                server._answer(self, body)

        self._httpd = ThreadingHTTPServer((host, 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def push(self, *replies: Reply | str) -> None:
        """Queue replies to use (in order) before falling back to the responder."""
        with self._lock:
            self._queue.extend(replies)

    def _record(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(RecordedRequest(time.monotonic(), path, headers, body))

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            item = self._queue.popleft() if self._queue else None
        if item is None:
            item = self.responder(body)
        return Reply(item) if isinstance(item, str) else item

    def _answer(self, h: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        if not h.path.rstrip("/").endswith("/chat/completions"):
            self._send(h, 404, b'{"error": "not found"}', {})
            return
        reply = self._next(body)
        if reply.delay_s:
            time.sleep(reply.delay_s)
        if reply.drop:
            h.close_connection = True
            h.connection.close()
            return
        if reply.garbage:
            self._send(h, 200, b"<html>definitely not json", {})
            return
        if reply.status != 200:
            message = reply.text or f"scripted {reply.status}"  # an error body may echo input
            payload = json.dumps({"error": {"message": message}}).encode()
            self._send(h, reply.status, payload, reply.headers)
            return
        payload = json.dumps(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", ""),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply.text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        ).encode()
        self._send(h, 200, payload, reply.headers)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, payload: bytes, headers: dict) -> None:
        try:
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(payload)))
            for k, v in headers.items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout): nothing to answer

    def start(self) -> ScriptedChatServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ScriptedChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
