"""The vision-language agent acting through an OpenAI-compatible server with weight sync: a
loopback server (`devicerl.testing.vlm_server`) runs a real tiny model, loads the LoRA
adapters the agent pushes with vLLM's endpoints, and returns log-probs that the learner's own
copy recomputes."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from vlm_helpers import observations

import devicerl.pool.pool as pool_mod
import devicerl.runtime.acting.collector as collector_mod
from devicerl.actions import Action
from devicerl.agents.vlm.agent import VLMAgent
from devicerl.agents.vlm.config import VLMConfig, VLMLoRA, VLMServerConfig, config_from_saved
from devicerl.clients.chat import ChatAuthError, ChatConfig
from devicerl.config import load_config
from devicerl.envs import EnvSpec
from devicerl.errors import ConfigError
from devicerl.tasks import Task, TaskSampler
from devicerl.testing.vlm_server import VLMTestServer
from devicerl.testing.vlm_tiny import build_tiny_vlm

KEY_ENV, KEY = "DEVICERL_TEST_VLM_KEY", "sk-test-9f8e7d6c5b4a"
#: A tiny random model's output layer bounds its logits: adapting it too lets a few imitation
#: steps make the policy sure of an action.
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_vlm(tmp_path_factory.mktemp("vlm") / "qwen2_vl", "qwen2_vl")


@pytest.fixture
def server(model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    with VLMTestServer(model_dir, name="base", api_key=KEY, allowed_root=tmp_path) as srv:
        yield srv


def _config(server, tmp_path, sync: str = "lora", **kw) -> VLMConfig:
    remote = VLMServerConfig(
        base_url=server.base_url,
        model="base",
        api_key_env=KEY_ENV,
        sync=sync,
        weights_dir=str(tmp_path / "weights"),
    )
    lora = VLMLoRA(r=8, alpha=16, target_modules=TARGETS) if sync == "lora" else None
    return VLMConfig(max_new_tokens=24, temperature=0.8, lora=lora, server=remote, **kw)


def test_server_options_are_the_endpoint_and_the_sync() -> None:
    """The server block holds the endpoint's address, model and key variable; the chat client
    it builds takes the rest at its defaults. An agent saved with the older nested ``chat``
    block loads with those three moved up; setting the nested block now is refused."""
    cfg = load_config(VLMConfig, None, ["server.model=base", "server.base_url=http://h:8000/v1"])
    assert cfg.server is not None and cfg.server.chat == ChatConfig("http://h:8000/v1", "base")
    with pytest.raises(ConfigError, match=r"vlm\.server\.model: name the served base model"):
        dataclasses.replace(cfg, server=dataclasses.replace(cfg.server, model="")).validate()
    with pytest.raises(ConfigError, match=r"unknown config key 'server\.chat'"):
        load_config(VLMConfig, None, ["server.chat.model=base"])
    older = {
        "chat": {"base_url": "http://h:8000/v1", "model": "base", "api_key_env": "K",
                 "timeout_s": 30.0, "max_retries": 0, "max_concurrency": 2,
                 "requests_per_minute": None},
        "sync": "none", "weights_dir": None,
    }  # fmt: skip
    server = config_from_saved({"server": older}).server
    assert server == VLMServerConfig("http://h:8000/v1", "base", "K", sync="none")
    with pytest.raises(ConfigError, match=r"vlm\.server\.colour"):
        config_from_saved({"server": {**older, "colour": "red"}})


def _imitate(agent: VLMAgent, action: Action, steps: int = 30) -> None:
    """A few imitation steps towards ``action``: each version is another policy, one that
    writes its action and stops."""
    obs = observations(2)
    params = list(agent.parameters())
    opt = torch.optim.Adam(params, lr=1e-2)
    for _ in range(steps):
        loss = -agent.log_prob(obs, [action] * 2).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)  # as the learners clip
        opt.step()


def _check(learner: VLMAgent, obs, samples) -> None:
    """Recorded log-probs are the learner's: of the exact served tokens always, and of the text
    (what a trajectory keeps) for samples that are their text's canonical tokens and ended."""
    recorded = torch.tensor([s.log_prob for s in samples])
    with torch.no_grad():
        exact = learner.score_ids(learner.encode(obs), [s.extras["token_ids"] for s in samples])
        text = learner.log_prob(obs, [s.action for s in samples], [s.text for s in samples])
    assert torch.allclose(exact, recorded, atol=1e-4), (exact, recorded)
    clean = [i for i, s in enumerate(samples) if "rescored" not in s.extras]
    assert torch.allclose(text[clean], recorded[clean], atol=1e-4)


def test_served_log_probs_equal_the_learners_and_adapters_follow_versions(
    server, model_dir, tmp_path
) -> None:
    cfg = _config(server, tmp_path)
    acting = VLMAgent.from_pretrained(model_dir, cfg)
    learner = VLMAgent.from_pretrained(model_dir, cfg)
    obs = observations(4)

    samples = acting.act(obs)  # version 0: a fresh adapter is the base model
    assert not acting.loaded  # a collector's copy holds no weights
    assert {s.extras["served_model"] for s in samples} == {"base"}
    _check(learner, obs, samples)

    targets = {1: Action.back(), 2: Action.home(), 3: Action.enter()}
    ended = 0
    for version, action in targets.items():
        _imitate(learner, action)
        acting.set_weights(learner.get_weights(), version)
        assert not acting.loaded
        samples = acting.act(obs)
        assert {s.extras["policy_version"] for s in samples} == {version}
        assert {s.extras["served_model"] for s in samples} == {f"{acting.remote.prefix}-v{version}"}
        assert sum(s.action == action for s in samples) >= 2  # this version's policy served
        _check(learner, obs, samples)
        ended += sum("rescored" not in s.extras for s in samples)
        greedy = acting.act(obs, greedy=True)  # served greedily: log-probs at temperature 1
        learner.temperature = 1.0
        _check(learner, obs, greedy)
        learner.temperature = cfg.temperature
    assert ended >= 6  # the text comparison was made

    prefix = acting.remote.prefix
    assert prefix.startswith("devicerl-") and len(prefix) == len("devicerl-") + 6
    assert server.adapters == [f"{prefix}-v2", f"{prefix}-v3"]  # keep_adapters = 2
    assert sorted(p.name for p in (tmp_path / "weights").iterdir()) == server.adapters
    loads = [r for r in server.requests if r.path == "/v1/load_lora_adapter"]
    assert [r.body["lora_name"] for r in loads] == [f"{prefix}-v{v}" for v in (1, 2, 3)]
    bodies = [r.body for r in server.requests if r.path == "/v1/chat/completions"]
    assert {b["max_tokens"] for b in bodies} == {24}  # the agent's max_new_tokens, per request
    assert {b["temperature"] for b in bodies} == {0.8, 0.0}  # its temperature; 0: greedy
    chat = [r for r in server.requests if r.path == "/v1/chat/completions"][-1]
    assert chat.body["logprobs"] is True and chat.body["return_tokens_as_token_ids"] is True
    assert chat.body["messages"][1]["content"][0]["image_url"]["url"].startswith(
        "data:image/png;base64,"
    )
    assert all(r.headers["Authorization"] == f"Bearer {KEY}" for r in server.requests)
    acting.close()


def test_collector_records_the_version_that_served_each_step(server, model_dir, tmp_path) -> None:
    cfg = _config(server, tmp_path)
    acting = VLMAgent.from_pretrained(model_dir, cfg)
    learner = VLMAgent.from_pretrained(model_dir, dataclasses.replace(cfg, server=None))
    tasks = [Task("synthetic/tap", max_steps=2, env="synthetic")]
    specs = [
        EnvSpec("synthetic/tap", {"n_boxes": 3, "seed": i, "screen": (64, 96)}) for i in (0, 1)
    ]
    with pool_mod.EnvPool(specs, tasks=TaskSampler(tasks, seed=1), worker="serial") as pool:
        collector = collector_mod.Collector(pool, acting)
        first = collector.run(2)
        _imitate(learner, Action.tap(0.5, 0.5))
        acting.set_weights(learner.get_weights(), version=4)
        later = collector.run(3)
    assert {s.policy_version for t in first for s in t.steps} == {0}
    fresh = [t for t in later if {s.policy_version for s in t.steps} == {4}]
    assert fresh
    steps = [s for t in fresh for s in t.steps]
    obs = [t.agent_observation(i) for t in fresh for i in range(t.length)]
    with torch.no_grad():
        lp = learner.log_prob(obs, [s.action for s in steps], [s.text for s in steps])
    recorded = torch.tensor([s.log_prob for s in steps])
    agree = (lp - recorded).abs() < 1e-4  # samples that are their text's tokens and ended
    assert agree.sum() >= max(1, len(steps) // 2), (lp, recorded)
    acting.close()


def test_a_refused_adapter_keeps_the_version_the_server_serves(server, model_dir, tmp_path):
    cfg = _config(server, tmp_path)
    acting = VLMAgent.from_pretrained(model_dir, cfg)
    learner = VLMAgent.from_pretrained(model_dir, cfg)
    _imitate(learner, Action.back(), steps=2)
    acting.set_weights(learner.get_weights(), 1)
    server.allowed_root = tmp_path / "elsewhere"  # the server can no longer read our folder
    acting.set_weights(learner.get_weights(), 2)
    assert acting.version == 1  # steps record the version that is served
    served = {s.extras["served_model"] for s in acting.act(observations(2))}
    assert served == {f"{acting.remote.prefix}-v1"}
    server.allowed_root = tmp_path.resolve()
    acting.set_weights(learner.get_weights(), 3)
    assert acting.version == 3 and server.adapters[-1] == f"{acting.remote.prefix}-v3"
    acting.close()


def test_a_learners_own_copy_serves_its_current_weights(server, model_dir, tmp_path) -> None:
    """A learner's actor (its model loaded, its version set by the trainer) pushes its weights
    before acting through the server, e.g. when it is evaluated."""
    learner = VLMAgent.from_pretrained(model_dir, _config(server, tmp_path))
    _imitate(learner, Action.home())
    learner.version = 5  # as the trainer sets it after an update
    obs = observations(3)
    samples = learner.act(obs)
    assert {s.extras["served_model"] for s in samples} == {f"{learner.remote.prefix}-v5"}
    assert sum(s.action == Action.home() for s in samples) >= 2
    _check(learner, obs, samples)
    learner.act(obs)
    loads = [r.body["lora_name"] for r in server.requests if "load_lora" in r.path]
    assert loads == [f"{learner.remote.prefix}-v5"]  # pushed once
    learner.close()


def test_full_weight_checkpoints_reload_the_server(server, model_dir, tmp_path) -> None:
    cfg = _config(server, tmp_path, sync="checkpoint")
    acting = VLMAgent.from_pretrained(model_dir, cfg)
    learner = VLMAgent.from_pretrained(model_dir, dataclasses.replace(cfg, server=None))
    _imitate(learner, Action.back())
    acting.set_weights(learner.get_weights(), 1)
    reload = [r for r in server.requests if r.path == "/update_weights_from_disk"]
    assert len(reload) == 1 and reload[0].body["model_path"].endswith("checkpoint-v1")
    obs = observations(3)
    samples = acting.act(obs)
    assert {s.extras["served_model"] for s in samples} == {"base"}
    assert sum(s.action == Action.back() for s in samples) >= 2  # the reloaded weights
    _check(learner, obs, samples)
    acting.close()


def test_a_wrong_key_stops_the_run_without_showing_the_key(
    server, model_dir, tmp_path, monkeypatch
) -> None:
    acting = VLMAgent.from_pretrained(model_dir, _config(server, tmp_path))
    monkeypatch.setenv(KEY_ENV, "sk-wrong-0000000000")
    with pytest.raises(ChatAuthError) as info:
        acting.act(observations(1))
    assert "sk-wrong" not in str(info.value) and KEY not in str(info.value)
    saved = json.dumps(dataclasses.asdict(acting.config))
    assert KEY not in saved and "sk-wrong" not in saved
    acting.close()
