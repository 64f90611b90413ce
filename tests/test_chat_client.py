import threading
import time

import numpy as np
import pytest

from devicerl.clients import ChatClient, ChatConfig, ChatError, image_part, text_part
from devicerl.clients.chat import ChatAuthError
from devicerl.config import load_config
from devicerl.errors import ConfigError
from devicerl.testing.chat_server import Reply, ScriptedChatServer


def _client(srv: ScriptedChatServer, max_retries: int | None = None, **kw) -> ChatClient:
    cfg = ChatConfig(base_url=srv.base_url, model="m", **kw)
    return ChatClient(cfg, max_retries=max_retries)


def test_reply_and_request_shape(monkeypatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-secret")
    with ScriptedChatServer(lambda body: Reply("hello")) as srv:
        client = _client(srv, api_key_env="MY_KEY")
        img = np.zeros((8, 8, 3), np.uint8)
        reply = client.complete([{"role": "user", "content": [text_part("hi"), image_part(img)]}])
        assert reply.text == "hello" and reply.attempts == 1
        req = srv.requests[0]
        assert req.path == "/v1/chat/completions"
        assert req.headers["Authorization"] == "Bearer sk-secret"
        parts = req.body["messages"][0]["content"]
        assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
        assert "sk-secret" not in repr(client)


def test_retries_on_429_500_timeout_garbage_then_succeeds() -> None:
    with ScriptedChatServer() as srv:
        srv.push(
            Reply(status=429, headers={"Retry-After": "0"}),
            Reply(status=503),
            Reply(delay_s=1.0),
            Reply(garbage=True),
            Reply(drop=True),
            "fine",
        )
        client = _client(srv, timeout_s=0.3, max_retries=5)
        reply = client.complete([{"role": "user", "content": "x"}])
        assert reply.text == "fine" and reply.attempts == 6
        assert client.stats.retries == 5


def test_retries_are_bounded_and_4xx_fails_fast() -> None:
    with ScriptedChatServer(lambda body: Reply(status=500)) as srv:
        client = _client(srv, max_retries=2)
        with pytest.raises(ChatError, match="gave up after 3 attempts") as e:
            client.complete([{"role": "user", "content": "x"}])
        assert e.value.status == 500 and len(srv.requests) == 3
    with ScriptedChatServer(lambda body: Reply(status=401)) as srv:
        client = _client(srv, max_retries=5)
        with pytest.raises(
            ChatAuthError, match=r"HTTP 401 .*name the key.s variable in api_key_env"
        ):
            client.complete([{"role": "user", "content": "x"}])
        assert len(srv.requests) == 1


def test_rate_limit_and_concurrency_cap() -> None:
    active = 0
    peak = 0
    lock = threading.Lock()

    def slow(body):
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.05)
        with lock:
            active -= 1
        return Reply("ok")

    with ScriptedChatServer(slow) as srv:
        client = _client(srv, max_concurrency=2, requests_per_minute=600)  # 10/s
        threads = [
            threading.Thread(target=client.complete, args=([{"role": "user", "content": "x"}],))
            for _ in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        times = sorted(r.at for r in srv.requests)
        assert len(times) == 8 and peak <= 2
        gaps = np.diff(times)
        # 10 requests/s, burst 1. Arrival times jitter on a loaded machine (a late request can
        # arrive just before the next, on-time one), so: never three within one interval's
        # half, and the mean rate holds
        pairs = np.array(times[2:]) - np.array(times[:-2])
        assert pairs.min() >= 0.05 and gaps.mean() >= 0.09, gaps


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="base_url"):
        load_config(ChatConfig, None, ["base_url=ftp://x"])
    # the retry count is the client's keyword (default 4), not an option of the config
    with pytest.raises(ConfigError, match="unknown config key 'max_retries'"):
        load_config(ChatConfig, None, ["max_retries=2"])
    assert ChatClient(ChatConfig()).max_retries == 4
    with pytest.raises(ConfigError, match="max_retries"):
        ChatClient(ChatConfig(), max_retries=-1)
