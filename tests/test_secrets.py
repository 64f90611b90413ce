"""Secrets never land in a run: a real loopback endpoint that echoes the request's Authorization
header, real `devicerl` processes, and every file they write searched for the key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from devicerl.config import load_config, save_config
from devicerl.runtime.runs.folder import RunDir
from devicerl.secrets import MASK, ScrubFilter, register, scrub

KEY = "sk-live-Zq9XwV7tR2pL4mN8"  # the secret; its variable's name does not look secret
VAR = "JUDGE_CREDS"
ROOT = Path(__file__).resolve().parents[1]
FAST = [
    "env.name=synthetic",
    "env.worker=serial",
    "env.num_envs=2",
    "tasks.train=synthetic/tap",
    "tasks.max_steps=2",
    "logging.tensorboard=false",
    "trajectories_per_iter=4",
    "eval.at_end=false",
]


class EchoServer:
    """Chat-completions endpoint on loopback answering ``status`` with the request's
    Authorization header echoed in the body (as some misconfigured proxies do)."""

    def __init__(self, status: int) -> None:
        self.requests: list[dict[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.requests.append(dict(self.headers))
                echo = self.headers.get("Authorization", "")
                payload = json.dumps({"error": f"bad credentials; you sent Authorization: {echo}"})
                data = payload.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> EchoServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def devicerl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), VAR: KEY, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "devicerl", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=240,
        cwd=ROOT,
    )


def files_holding(folder: Path, needle: str) -> list[str]:
    """Files under ``folder`` whose bytes, or (Parquet) whose decoded text columns, hold it."""
    found = []
    for p in folder.rglob("*"):
        if not p.is_file():
            continue
        if needle.encode() in p.read_bytes() or (
            p.suffix == ".parquet"
            and needle in json.dumps(pq.read_table(p).to_pylist(), default=str)
        ):
            found.append(str(p))
    return found


def judge_args(url: str) -> list[str]:
    return [
        "judge.kind=vlm",
        f"judge.chat.base_url={url}",
        "judge.chat.model=m",
        f"judge.chat.api_key_env={VAR}",
        "judge.chat.max_concurrency=1",
        "judge.vlm.cache_path=",
    ]


def test_a_judge_that_refuses_the_key_stops_the_run_in_one_line(tmp_path) -> None:
    with EchoServer(401) as srv:
        out = tmp_path / "run"
        r = devicerl("train", "--out", str(out), *FAST, "env_steps=40", *judge_args(srv.base_url))
    assert r.returncode == 2, r.stderr
    lines = [line for line in r.stderr.splitlines() if "error" in line.lower()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0] == r.stderr.strip().splitlines()[-1]  # the last word, after the progress bar
    assert srv.base_url in lines[0] and "HTTP 401" in lines[0] and f"${VAR}" in lines[0]
    assert len(srv.requests) == 1  # not retried, nothing more asked after the refusal
    assert KEY not in r.stdout + r.stderr
    assert files_holding(out, KEY) == []


def test_an_api_agent_that_gets_403_stops_the_eval(tmp_path) -> None:
    with EchoServer(403) as srv:
        agent = ["agent.kind=api", f"agent.api.chat.base_url={srv.base_url}"]
        agent += ["agent.api.chat.model=m", f"agent.api.chat.api_key_env={VAR}"]
        r = devicerl("eval", "--out", str(tmp_path / "ev"), *FAST, "eval.n_tasks=1", *agent)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "HTTP 403" in r.stderr and f"${VAR}" in r.stderr and KEY not in r.stderr
    assert len(srv.requests) == 1


def test_an_echoed_key_never_reaches_the_store_the_report_or_the_logs(tmp_path) -> None:
    out = tmp_path / "run"
    with EchoServer(400) as srv:  # not an auth failure: the judge answers "unknown" with why
        r = devicerl(
            "-vv", "train", "--out", str(out), *FAST, "env_steps=12", *judge_args(srv.base_url)
        )
    assert r.returncode == 0, r.stderr
    assert len(srv.requests) > 0 and srv.requests[0]["Authorization"] == f"Bearer {KEY}"
    tables = [pq.read_table(p).to_pylist() for p in (out / "trajectories").rglob("*.parquet")]
    text = json.dumps(tables, default=str)
    assert "bad credentials; you sent Authorization: Bearer " + MASK in text  # reason kept
    view = devicerl("view", str(out))
    assert view.returncode == 0, view.stderr
    assert (out / "report" / "index.html").exists()
    assert KEY not in r.stdout + r.stderr + view.stdout + view.stderr
    assert files_holding(out, KEY) == []


def test_variable_names_are_config_and_survive_resume(tmp_path) -> None:
    from devicerl.runtime.setup.config import TrainConfig

    cfg = load_config(TrainConfig, None, ["judge.chat.api_key_env=GEMINI_API_KEY"])
    run = RunDir(tmp_path / "r")
    save_config(cfg, run.config_path)
    assert "api_key_env: GEMINI_API_KEY" in run.config_path.read_text()
    assert run.load_config(TrainConfig).judge.chat.api_key_env == "GEMINI_API_KEY"


def test_the_scrubber_removes_values_and_headers_and_keeps_names(monkeypatch) -> None:
    monkeypatch.setenv("SOME_PLAIN_NAME", "value-of-a-registered-var")
    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijklmnop")
    register("SOME_PLAIN_NAME")
    text = (
        "api_key_env=HF_TOKEN value-of-a-registered-var hf_abcdefghijklmnop "
        "{'Authorization': 'Bearer unknown-to-us-123'} api-key: zzzz9999 x-api-key=qqqq1111"
    )
    out = scrub(text)
    for leaked in ("value-of-a-registered-var", "hf_abcdefghijklmnop", "unknown-to-us-123"):
        assert leaked not in out
    assert "zzzz9999" not in out and "qqqq1111" not in out
    assert out.startswith("api_key_env=HF_TOKEN ")
    record = __import__("logging").LogRecord(
        "x", 30, "f", 1, "key %s", ("hf_abcdefghijklmnop",), None
    )
    ScrubFilter().filter(record)
    assert record.getMessage() == f"key {MASK}"


@pytest.mark.parametrize("name", ["api_key", "hf_token", "db_password"])
def test_secret_config_values_are_redacted_but_env_names_are_not(tmp_path, name) -> None:
    path = tmp_path / "c.yaml"
    save_config({name: "s3cr3t-value", "api_key_env": "MY_VAR"}, path)
    text = path.read_text()
    assert "s3cr3t-value" not in text and "api_key_env: MY_VAR" in text


def test_a_saved_training_config_loads_back_whole(tmp_path) -> None:
    """Counts named like secrets (``max_tokens``, ``max_instr_tokens``) are config, not secrets:
    the saved config.yaml of a run must load back to the same config."""
    from devicerl.config import to_dict
    from devicerl.runtime.setup.config import TrainConfig

    path = tmp_path / "config.yaml"
    save_config(TrainConfig(), path)
    assert MASK not in path.read_text()
    assert to_dict(load_config(TrainConfig, path)) == to_dict(TrainConfig())
