"""A client for OpenAI-compatible chat completions (vLLM, hosted APIs, Gemini's endpoint).

Shared by the API agent and the VLM judge. It is thread-safe and bounded:
- a concurrency cap (semaphore) and an optional token-bucket rate limit (requests per minute);
- retries with exponential backoff (honouring ``Retry-After``) on 429, 5xx, timeouts,
  connection errors and unreadable bodies; other 4xx fail at once; 401/403 raise
  `ChatAuthError`, which stops the run (one line naming the endpoint and the variable);
- the API key is read from the environment variable named by ``api_key_env`` and is never
  stored in configs, logs or errors (`devicerl.secrets` scrubs it from every message);
- a caller can bound what a series of requests may spend in all (`call_budget`: failed
  attempts, a deadline, an event that cancels them): a judge gives each episode's verdict a
  budget, the API agent each episode's failures, so a failing endpoint costs a known time.

`ChatClient.complete` returns a `ChatReply` or raises `ChatError` once retries are spent; callers
turn that into an invalid action or an "unknown" verdict, so a dead API never crashes a run.
"""

from __future__ import annotations

import base64
import contextlib
import io
import logging
import os
import random
import threading
import time
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from devicerl.errors import AuthError, ConfigError, DeviceRLError
from devicerl.secrets import is_env_name, register, scrub

if TYPE_CHECKING:  # httpx and numpy load when used, so `devicerl --help` stays fast
    import httpx
    import numpy as np

log = logging.getLogger(__name__)

Message = dict[str, Any]


class ChatError(DeviceRLError):
    """The endpoint could not answer (after bounded retries) or refused the request."""

    def __init__(self, message: str, status: int | None = None, attempts: int = 0) -> None:
        super().__init__(scrub(message))  # a server may echo the key it was sent
        self.status = status
        self.attempts = attempts


class ChatAuthError(ChatError, AuthError):
    """The endpoint refused our credentials (HTTP 401/403). Never retried, never turned into an
    unknown verdict or an invalid action: no later request can succeed, so the run stops."""


@dataclass
class ChatConfig:
    """Where and how to call a chat-completions endpoint."""

    base_url: str = field(
        default="http://127.0.0.1:8000/v1", metadata={"help": "endpoint base URL, ending in /v1"}
    )
    model: str = field(default="", metadata={"help": "model name sent with each request"})
    api_key_env: str = field(
        default="",
        metadata={
            "help": "name of the environment variable that holds the API key, e.g. "
            "OPENAI_API_KEY (empty: the endpoint takes no key); no request is sent while it "
            "is unset",
            "form": "env_name",
        },
    )
    timeout_s: float = field(
        default=60.0, metadata={"help": "per-request timeout (seconds)", "gt": 0}
    )
    max_concurrency: int = field(
        default=8, metadata={"help": "requests in flight at once", "min": 1}
    )
    requests_per_minute: float | None = field(
        default=None, metadata={"help": "rate limit (null: unlimited)", "gt": 0}
    )

    def validate(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"chat.base_url={self.base_url}: must start with http:// or https://")
        if self.api_key_env and not is_env_name(self.api_key_env):  # never show what was typed
            raise ConfigError("chat.api_key_env: must name an environment variable, not hold a key")
        if self.max_concurrency < 1 or self.timeout_s <= 0:
            raise ConfigError("max_concurrency >= 1 and timeout_s > 0 required")
        if self.requests_per_minute is not None and self.requests_per_minute <= 0:
            raise ConfigError("requests_per_minute must be > 0 (null: unlimited)")


class TokenBucket:
    """Blocks callers so that at most ``rate`` requests per second start (bursts of ``burst``)."""

    def __init__(self, rate_per_s: float, burst: int = 1) -> None:
        self.rate = rate_per_s
        self.capacity = float(burst)
        self._tokens = float(burst)
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def acquire(self) -> None:
        if self.rate <= 0:
            return
        while True:
            with self._lock:
                now = time.monotonic()
                self._tokens = min(self.capacity, self._tokens + (now - self._last) * self.rate)
                self._last = now
                if self._tokens >= 1.0:
                    self._tokens -= 1.0
                    return
                wait = (1.0 - self._tokens) / self.rate
            time.sleep(wait)


@dataclass
class CallBudget:
    """What the requests made under `call_budget` may spend in all: ``attempts`` failed
    attempts (None: each request's own retries only), seconds until ``deadline`` (a
    `time.monotonic` value; None: no limit) and an event that ``cancel``s them. The client
    counts the failed attempts in ``failed``; no attempt starts once one of the three is spent,
    a request waits at most until the deadline, and a backoff ends when it is cancelled."""

    attempts: int | None = None
    deadline: float | None = None
    cancel: threading.Event | None = None
    failed: int = 0

    def spent(self) -> str | None:
        """Why no further attempt may start (None: one may)."""
        if self.cancel is not None and self.cancel.is_set():
            return "cancelled"
        if self.attempts is not None and self.failed >= self.attempts:
            return f"failure budget of {self.attempts} attempts spent"
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return "time budget spent"
        return None

    def seconds_left(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def wait(self, seconds: float) -> None:
        """A backoff: ``seconds``, or less when the deadline comes first or it is cancelled."""
        left = self.seconds_left()
        seconds = seconds if left is None else min(seconds, left)
        if self.cancel is not None:
            self.cancel.wait(seconds)
        else:
            time.sleep(seconds)


_BUDGET: ContextVar[CallBudget | None] = ContextVar("devicerl_chat_budget", default=None)


@contextlib.contextmanager
def call_budget(budget: CallBudget) -> Iterator[CallBudget]:
    """Every `ChatClient.complete` in this thread, inside the block, spends from ``budget``."""
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


@dataclass
class ChatReply:
    """One successful completion."""

    text: str
    raw: dict[str, Any]
    attempts: int
    latency_s: float
    usage: dict[str, Any] = field(default_factory=dict)


@dataclass
class ChatStats:
    """Counters for logs and tests (thread-safe updates through the client)."""

    requests: int = 0
    retries: int = 0
    failures: int = 0
    started_at: list[float] = field(default_factory=list)


def encode_image(image: np.ndarray | bytes, fmt: str = "png", quality: int = 85) -> str:
    """A ``data:`` URL for an H x W x 3 uint8 array (or already-encoded bytes)."""
    if isinstance(image, bytes):
        data, mime = image, "image/png" if image[:4] == b"\x89PNG" else "image/jpeg"
    else:
        from PIL import Image

        buf = io.BytesIO()
        import numpy as np

        img = Image.fromarray(np.ascontiguousarray(image))
        if fmt == "jpeg":
            img.save(buf, format="JPEG", quality=quality)
            mime = "image/jpeg"
        else:
            img.save(buf, format="PNG")
            mime = "image/png"
        data = buf.getvalue()
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def image_part(image: np.ndarray | bytes, fmt: str = "png") -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": encode_image(image, fmt)}}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def unset_key_message(var: str) -> str:
    """The one line for a key variable that is unset (nothing is sent without it)."""
    return (
        f"${var} is not set (chat.api_key_env names it): no request sent; set it, or set "
        "api_key_env to '' for an endpoint that takes no key"
    )


class ChatClient:
    """Thread-safe chat-completions client with concurrency cap, rate limit and retries.

    A request is retried up to ``max_retries`` times after its first attempt; retries wait
    ``backoff_s`` seconds, doubling each time up to ``backoff_max_s`` (jittered; a server's
    ``Retry-After`` is honoured)."""

    max_retries = 4
    backoff_s = 1.0
    backoff_max_s = 30.0
    #: request defaults (a call's own ``temperature`` / ``max_tokens`` win)
    temperature = 0.0
    max_tokens = 512

    def __init__(
        self,
        config: ChatConfig,
        transport: httpx.BaseTransport | None = None,
        *,
        backoff_s: float | None = None,
        temperature: float | None = None,
        max_retries: int | None = None,
    ) -> None:
        config.validate()
        if max_retries is not None:
            if max_retries < 0:
                raise ConfigError(f"max_retries={max_retries}: must be >= 0")
            self.max_retries = max_retries
        register(config.api_key_env)
        self.config = config
        if backoff_s is not None:
            self.backoff_s = backoff_s
        if temperature is not None:
            self.temperature = temperature
        self._sem = threading.BoundedSemaphore(config.max_concurrency)
        self._bucket = TokenBucket((config.requests_per_minute or 0.0) / 60.0)
        import httpx

        self._http = httpx.Client(timeout=config.timeout_s, transport=transport)
        self._lock = threading.Lock()
        self._refused: ChatAuthError | None = None  # the endpoint refused the key: it will again
        self.stats = ChatStats()

    def __repr__(self) -> str:  # never shows the key
        return f"ChatClient(base_url={self.config.base_url!r}, model={self.config.model!r})"

    def _headers(self) -> dict[str, str]:
        """The request's headers: the key of ``api_key_env`` (none when it names nothing); a
        named variable that is unset is a `ChatAuthError` before anything is sent."""
        headers = {"Content-Type": "application/json"}
        var = self.config.api_key_env
        if var:
            key = os.environ.get(var, "")
            if not key:
                raise ChatAuthError(unset_key_message(var), None, 0)
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        base = self.backoff_s * (2**attempt)
        if retry_after:
            with contextlib.suppress(ValueError):
                base = max(base, float(retry_after))
        return min(self.backoff_max_s, base) * (0.8 + 0.4 * random.random())

    def complete(self, messages: Sequence[Message], **params: Any) -> ChatReply:
        """Send one chat request; retry within bounds (the retries, and the `call_budget` this
        thread is in); raise `ChatError` when they are spent."""
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": list(messages),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        body.update(params)
        url = self.config.base_url.rstrip("/") + "/chat/completions"
        headers = self._headers()
        last = "no attempt made"
        status: int | None = None
        t0 = time.perf_counter()
        import httpx

        budget = _BUDGET.get() or CallBudget()
        attempts = 0
        for attempt in range(self.max_retries + 1):
            stopped = budget.spent()
            if stopped is not None:
                break
            attempts += 1
            retry_after = None
            timeout = self.config.timeout_s
            left = budget.seconds_left()
            if left is not None:
                timeout = max(0.001, min(timeout, left))
            with self._sem:
                if self._refused is not None:  # refused while this call waited its turn
                    raise self._refused
                self._bucket.acquire()
                with self._lock:
                    self.stats.requests += 1
                    self.stats.started_at.append(time.monotonic())
                try:
                    resp = self._http.post(url, json=body, headers=headers, timeout=timeout)
                    status = resp.status_code
                except httpx.TimeoutException:
                    status, last = None, f"timed out after {timeout:.3g}s"
                    resp = None
                except httpx.TransportError as e:
                    status, last = None, f"connection error: {type(e).__name__}"
                    resp = None
            if resp is not None:
                if status == 200:
                    try:
                        return self._reply(resp.json(), attempt + 1, time.perf_counter() - t0)
                    except (ValueError, KeyError, IndexError, TypeError) as e:
                        last = f"unreadable reply body ({type(e).__name__})"
                elif status == 429 or (status is not None and status >= 500):
                    last = f"HTTP {status}: {resp.text[:200]}"
                    retry_after = resp.headers.get("retry-after")
                elif status in (401, 403):
                    refused = ChatAuthError(self._auth_message(url, status), status, attempt + 1)
                    with self._lock:
                        self.stats.failures += 1
                        self._refused = refused
                    raise refused
                else:
                    with self._lock:
                        self.stats.failures += 1
                    raise ChatError(
                        f"{url} refused the request: HTTP {status}: {resp.text[:200]}",
                        status,
                        attempt + 1,
                    )
            budget.failed += 1
            if attempt < self.max_retries and budget.spent() is None:
                with self._lock:
                    self.stats.retries += 1
                delay = self._delay(attempt, retry_after)
                log.info("chat request failed (%s); retry %d in %.2fs", last, attempt + 1, delay)
                budget.wait(delay)
        with self._lock:
            self.stats.failures += 1
        stopped = budget.spent()
        why = f"gave up after {attempts} attempts" + (f" ({stopped})" if stopped else "")
        raise ChatError(f"{url}: {why}: {last}", status, attempts)

    def _auth_message(self, url: str, status: int) -> str:
        var = self.config.api_key_env
        what = "unauthorized" if status == 401 else "forbidden"
        fix = f"check the API key in ${var}" if var else "name the key's variable in api_key_env"
        return f"{url} answered HTTP {status} ({what}): {fix}"

    @staticmethod
    def _reply(data: dict[str, Any], attempts: int, latency: float) -> ChatReply:
        content = data["choices"][0]["message"]["content"]
        if isinstance(content, list):  # some servers return content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if not isinstance(content, str):
            raise TypeError("message content is not text")
        return ChatReply(content, data, attempts, latency, data.get("usage") or {})

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
