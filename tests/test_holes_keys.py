"""Rule: no secret in any written file, whatever field it was typed into. ``api_key_env`` holds
a variable's name (a key pasted there is refused in one line naming the field, never the
value); every config value written passes the scrubber; no request is sent while the named
variable is unset (one line naming it)."""

from __future__ import annotations

import pytest
from _holes import SYN, cli

from devicerl.clients.chat import ChatAuthError, ChatClient, ChatConfig
from devicerl.errors import ConfigError
from devicerl.runtime.runs.folder import RunDir
from devicerl.testing.chat_server import Reply, ScriptedChatServer

KEY = "sk-proj-4f1c9e27d6b84a0fb3e5aa01"


@pytest.mark.parametrize(
    "field", ["judge.chat.api_key_env", "agent.api.chat.api_key_env", "judge.chat.model"]
)
def test_a_key_typed_into_a_field_is_refused_or_masked(field, tmp_path, capsys, monkeypatch):
    """Into ``api_key_env``: refused before anything is written, the value not echoed. Into
    any other field (here the model's name, while the key is in the variable it belongs
    in): the run's files hold it masked."""
    monkeypatch.setenv("HOLES_API_KEY", KEY)  # a variable with a secret-looking name
    out = tmp_path / "run"
    r = cli(capsys, "train", "--out", out, *SYN, "env_steps=4", f"{field}={KEY}")
    if field.endswith("api_key_env"):
        line = r.one_line()
        assert field in line and KEY not in r.err + r.out and not out.exists()
        return
    assert r.code == 0, r.err
    written = [p for p in out.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert written == [] and KEY not in r.out + r.err


def test_a_key_in_a_config_file_is_refused_without_echo(tmp_path, capsys) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(f"judge:\n  kind: vlm\n  chat: {{model: m, api_key_env: '{KEY}'}}\n")
    r = cli(capsys, "train", "--config", config, "--out", tmp_path / "run", *SYN)
    assert "judge.chat.api_key_env" in r.one_line() and KEY not in r.err
    with pytest.raises(ConfigError, match="api_key_env") as e:
        ChatClient(ChatConfig(api_key_env=KEY))  # built in code, not loaded: the same rule
    assert KEY not in str(e.value)


@pytest.fixture()
def server():
    with ScriptedChatServer(lambda body: Reply("Verdict: SUCCESS\nAction: CLICK(0.5, 0.5)")) as s:
        yield s


def test_no_request_is_sent_while_the_named_variable_is_unset(server, tmp_path, capsys):
    chat = [
        "agent.kind=api",
        f"agent.api.chat.base_url={server.base_url}",
        "agent.api.chat.model=m",
    ]
    unset = "HOLES_UNSET_ENDPOINT_KEY"
    r = cli(
        capsys, "eval", "--out", tmp_path / "run", *SYN, *chat,
        f"agent.api.chat.api_key_env={unset}", "eval.n_tasks=1",
    )  # fmt: skip
    line = r.one_line()
    assert unset in line and "not set" in line and "agent.api.chat.api_key_env" in line
    assert server.requests == [] and not (tmp_path / "run").exists()
    client = ChatClient(ChatConfig(base_url=server.base_url, model="m", api_key_env=unset))
    with pytest.raises(ChatAuthError, match=unset):
        client.complete([{"role": "user", "content": "hi"}])
    assert server.requests == [] and client.stats.requests == 0


def test_an_endpoint_without_a_key_needs_no_variable(server, tmp_path, capsys) -> None:
    """``api_key_env`` empty (the default): a local server that takes no key."""
    chat = [
        "agent.kind=api",
        f"agent.api.chat.base_url={server.base_url}",
        "agent.api.chat.model=m",
    ]
    r = cli(capsys, "eval", "--out", tmp_path / "run", *SYN, *chat, "eval.n_tasks=1")
    assert r.code == 0, r.err
    assert server.requests and RunDir(tmp_path / "run").config_path.is_file()
