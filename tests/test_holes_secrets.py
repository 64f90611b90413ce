"""Rule: one exit for text. A real chat endpoint on loopback echoes the API key in every place
an endpoint can (an error body, a 200 reply's text, response headers, a retried 429/500); the
judge in a training run, the API agent in an evaluation and ``judge-eval --json`` then run
against it, and the key must be in no file they wrote (stores decoded, caches, reports, JSON,
logs) and in no stream (stdout, stderr, logs at debug level)."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from _holes import SYN, cli, episodes

from devicerl.clients.chat import ChatClient
from devicerl.runtime.runs.folder import RunDir
from devicerl.testing.chat_server import Reply, ScriptedChatServer

KEY_VAR = "HOLES_ENDPOINT_ACCESS"  # not a secret-looking name: registered by api_key_env only
KEY = "hk-4f1c9e27d6b84a0fb3e5"


def echoing() -> ScriptedChatServer:
    """Answers in turn: a verdict quoting the key, a 400 whose body holds it, a verdict with
    the key in its headers, a 429 and a 500 (retried) that echo it in body and headers."""
    turn = itertools.count()
    lock = threading.Lock()

    def respond(body: dict) -> Reply:
        with lock:
            n = next(turn) % 5
        echo = {"X-Echo-Authorization": f"Bearer {KEY}", "X-Key": KEY}
        return [
            Reply(f"Rationale: the screen shows the key {KEY}.\nVerdict: SUCCESS"),
            Reply(status=400, text=f"invalid request: key {KEY} is not allowed"),
            Reply("Rationale: nothing happened.\nVerdict: FAILURE", headers=echo),
            Reply(status=429, text=f"slow down, {KEY}", headers={"Retry-After": "0", **echo}),
            Reply(status=500, text=f"upstream said: Authorization: Bearer {KEY}", headers=echo),
        ][n]

    return ScriptedChatServer(respond)


def leaks(folder: Path) -> list[str]:
    """Files under ``folder`` that hold the key: raw bytes, and Parquet shards decoded."""
    found = []
    for p in folder.rglob("*"):
        if not p.is_file():
            continue
        if KEY.encode() in p.read_bytes():
            found.append(str(p))
        elif p.suffix == ".parquet" and KEY in str(pq.read_table(p).to_pylist()):
            found.append(f"{p} (decoded)")
    return found


@pytest.fixture()
def server(monkeypatch):
    monkeypatch.setenv(KEY_VAR, KEY)
    monkeypatch.setattr(ChatClient, "max_retries", 0)  # an echoed error ends the request at once
    with echoing() as srv:
        yield srv


def chat(prefix: str, url: str) -> list[str]:
    return [
        f"{prefix}.model=m",
        f"{prefix}.base_url={url}",
        f"{prefix}.api_key_env={KEY_VAR}",
    ]


def test_judge_eval_json_and_streams_hold_no_key(server, tmp_path, capsys, caplog) -> None:
    caplog.set_level("DEBUG")
    with RunDir(tmp_path / "run").create().writer() as w:
        w.extend(episodes(10))
    r = cli(
        capsys,
        "-vv",
        "judge-eval",
        tmp_path / "run",
        "kind=vlm",
        f"vlm.cache_path={tmp_path / 'cache.sqlite'}",
        *chat("chat", server.base_url),
        "--json",
        tmp_path / "report.json",
    )
    assert r.code == 0, r.err
    assert all(KEY in str(q.headers) for q in server.requests)  # the key was sent, and echoed
    assert (tmp_path / "report.json").is_file() and (tmp_path / "cache.sqlite").is_file()
    assert "***" in (tmp_path / "report.json").read_text()  # a rationale that quoted it
    assert leaks(tmp_path) == []
    assert KEY not in r.out + r.err + caplog.text


def test_a_training_run_and_an_api_agent_hold_no_key(server, tmp_path, capsys, caplog) -> None:
    caplog.set_level("DEBUG")
    r = cli(
        capsys,
        "-vv",
        "train",
        "--out",
        tmp_path / "train",
        *SYN,
        "env_steps=12",
        "trajectories_per_iter=2",
        "judge.kind=vlm",
        f"judge.vlm.cache_path={tmp_path / 'train' / 'cache.sqlite'}",
        *chat("judge.chat", server.base_url),
    )
    assert r.code == 0, r.err
    judged = len(server.requests)
    r2 = cli(
        capsys,
        "-vv",
        "eval",
        "--out",
        tmp_path / "eval",
        *SYN,
        "eval.n_tasks=1",
        "eval.episodes_per_task=2",
        "agent.kind=api",
        *chat("agent.api.chat", server.base_url),
    )
    assert r2.code == 0, r2.err
    assert judged > 0 and len(server.requests) > judged
    assert leaks(tmp_path) == []
    assert KEY not in r.out + r.err + r2.out + r2.err + caplog.text
