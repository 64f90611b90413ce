"""The vision-language agent in every codec's language, on tiny random models of the families
that speak them: a model taught a codec's texts samples them with log-probs that teacher forcing
reproduces (padded batches, the codec's special tokens), stored texts are scored only when they
are this codec's, and DigiRL trains each codec's agent on a two-choice task through its LoRA
adapters. Agents saved before codecs existed still speak JSON."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from vlm_helpers import SCREEN, two_choices

import devicerl.pool.pool as pool_mod
import devicerl.runtime.acting.collector as collector_mod
from devicerl.agents.config import upgrade_saved_agent
from devicerl.agents.factory import AgentSpec
from devicerl.agents.vlm.agent import VLMAgent
from devicerl.agents.vlm.config import VLMConfig, VLMLoRA, VLMOptions
from devicerl.algos.config import ActorConfig, CriticConfig, DigiRLConfig
from devicerl.algos.digirl import DigiRL
from devicerl.codecs.json_actions import format_action
from devicerl.config import load_config, save_config, shipped_configs
from devicerl.envs import EnvSpec
from devicerl.errors import ConfigError
from devicerl.runtime.runs.folder import RunDir
from devicerl.runtime.setup.config import TrainConfig
from devicerl.tasks import Task, TaskSampler
from devicerl.testing.vlm_tiny import build_tiny_vlm

#: Each codec on the family its checkpoints are built on (JSON, AutoUI and Aguvis-style on
#: Qwen2-VL, which has no language of its own).
CODECS = {
    "json": "qwen2_vl",
    "autoui": "qwen2_vl",
    "mobile_use": "qwen2_5_vl",
    "mobile_use_qwen3": "qwen3_vl",
    "ui_tars": "qwen2_vl",
    "ui_tars_1_5": "qwen2_5_vl",
    "aguvis": "qwen2_vl",
}
SEED = 3
INSTRUCTIONS = "Tap the box the instruction names."
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def families(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    return {f: build_tiny_vlm(root / f, f) for f in set(CODECS.values())}


def _choices():
    return two_choices(SEED, decimals=1)  # one decimal: short texts for tiny models


def _imitate(agent: VLMAgent, obs, actions, steps: int = 120) -> None:
    """Teach ``actions`` by teacher forcing. At 5e-3 the codecs' mean NLL settles at the
    mixture's floor (AutoUI's long texts last); at 1.5e-2 the 30-token tool calls spiked back
    (NLL 0.9 -> 28 -> 0.7 over 200 steps) and a base sampled only cut-off text."""
    params = list(agent.parameters())
    opt = torch.optim.Adam(params, lr=5e-3)
    for _ in range(steps):
        loss = -agent.log_prob([obs] * len(actions), actions).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()


@pytest.fixture(scope="module")
def pretrained(families, tmp_path_factory):
    """Per codec, a base that writes both taps in the codec's language, the wrong one twice as
    often (as a GUI checkpoint knows its format), saved. A short system message stands in for
    the codec's own (`test_codecs.py` checks those), so the tiny models stay fast; the user turn,
    the reply and its coordinates are the codec's."""
    root = tmp_path_factory.mktemp("pretrained")
    obs, good, bad = _choices()
    out = {}
    for name, family in CODECS.items():
        config = VLMConfig(codec=name, history=0)
        agent = VLMAgent.from_pretrained(families[family], config, system_prompt=INSTRUCTIONS)
        g = agent.geometry(obs, agent.image(obs))
        longest = max(len(agent.target_ids(agent.codec.format(a, g))) for a in (good, bad))
        agent.config = dataclasses.replace(agent.config, max_new_tokens=longest + 8)
        _imitate(agent, obs, [good, bad, bad])
        agent.save(root / name)
        out[name] = root / name
    return out


@pytest.mark.parametrize("name", list(CODECS))
def test_sampled_log_probs_are_what_teacher_forcing_recomputes(pretrained, name) -> None:
    """A left-padded batch (instructions of other lengths) sampled from a model that writes the
    codec's texts: every sample that ended by itself in its text's own tokens records the
    log-prob teacher forcing gives its stored text (the codec's special tokens, UI-TARS' box
    tokens, as one token each), and the texts that are the codec's rendering of their action
    score the same with no text at all."""
    agent = VLMAgent.from_pretrained(pretrained[name])
    assert agent.codec.name == name
    obs = _choices()[0]
    longer = [dataclasses.replace(obs, instruction=obs.instruction + " " + "now " * k) for k in
              (1, 3)]  # fmt: skip
    batch = [obs, longer[0], obs, longer[1], obs]
    assert (agent.encode(batch)["attention_mask"] == 0).any()
    samples = agent.act(batch)
    with torch.no_grad():
        actions, texts = [s.action for s in samples], [s.text for s in samples]
        recomputed = agent.log_prob(batch, actions, texts)
        rendered = agent.log_prob(batch, actions)
    g = agent.geometry(obs, agent.image(obs))  # every row's screen is the same
    for i, s in enumerate(samples):
        if "rescored" not in s.extras:
            assert abs(float(recomputed[i]) - s.log_prob) < 1e-4, (name, s.text)
        if s.text == agent.codec.format(s.action, g):
            assert abs(float(rendered[i]) - float(recomputed[i])) < 1e-5
    ended = [s for s in samples if "rescored" not in s.extras and s.action.is_tap]
    assert ended, [(s.text, s.extras) for s in samples]  # taps in the codec's text, exact
    for token, tid in agent.special_ids.items():
        assert all(tid in agent.target_ids(s.text) for s in ended if token in s.text)


def test_a_stored_text_is_scored_only_when_it_is_this_codecs(pretrained) -> None:
    agent = VLMAgent.from_pretrained(pretrained["mobile_use"])
    obs, tap, _ = _choices()
    g = agent.geometry(obs, agent.image(obs))
    good = agent.codec.parse(agent.codec.format(tap, g), g)  # as a step stores it: on the grid
    own = agent.codec.format(good, g)
    thought = "Thought: the named box.\n" + own  # this codec's, spelled otherwise
    with torch.no_grad():
        lp = agent.log_prob([obs] * 4, [good] * 4, [None, own, format_action(good), thought])
    assert abs(float(lp[0] - lp[1])) < 1e-5  # the rendering is the codec's own text
    assert abs(float(lp[0] - lp[2])) < 1e-5  # another codec's text: rendered in this one
    assert float(lp[3]) < float(lp[0]) - 1.0  # this codec's text: scored as written
    assert set(agent.special_ids) == {"<tool_call>", "</tool_call>"}  # one token each


@pytest.mark.parametrize("name", list(CODECS))
def test_digirl_trains_every_codec_through_the_adapters(pretrained, name) -> None:
    obs, good, bad = _choices()
    lora = VLMLoRA(r=8, alpha=16, target_modules=TARGETS)
    agent = VLMAgent.from_pretrained(pretrained[name], overrides={"lora": lora})
    assert agent.codec.name == name

    def p_good() -> float:
        with torch.no_grad():
            return float(torch.softmax(agent.log_prob([obs, obs], [good, bad]), 0)[0])

    start = p_good()
    assert 0.1 < start < 0.6, start
    adapters = {n: p.detach().clone() for n, p in agent.named_trainable().items()}
    actor, critic = ActorConfig(lr=1e-2, updates=8, batch_size=8), CriticConfig(batch_size=16)
    learner = DigiRL(agent, DigiRLConfig(top_p=0.5), actor, critic, seed=0)
    tasks = [Task("synthetic/tap", max_steps=3, env="synthetic", params={"n_boxes": 2})]
    specs = [
        EnvSpec("synthetic/tap", {"n_boxes": 2, "seed": i, "screen": SCREEN}) for i in range(4)
    ]
    sampler = TaskSampler(tasks, seed=1, seeds=(SEED, SEED + 1))
    replay = []
    with pool_mod.EnvPool(specs, tasks=sampler, worker="serial") as pool:
        collector = collector_mod.Collector(pool, agent)
        for _ in range(3):
            replay += collector.run(16)
            learner.update(replay)
    assert p_good() > 0.85, (name, start, p_good())
    moved = [n for n, p in agent.named_trainable().items() if not torch.equal(p, adapters[n])]
    assert any("lora_B" in n for n in moved) and all(".lora_" in n for n in moved)


def test_codec_choice_family_defaults_and_agents_saved_before_codecs(families, tmp_path) -> None:
    qwen25 = families["qwen2_5_vl"]
    assert VLMAgent.from_pretrained(qwen25).config.codec == "mobile_use"  # the family's own
    assert VLMAgent.from_pretrained(families["qwen3_vl"]).codec.name == "mobile_use_qwen3"
    assert VLMAgent.from_pretrained(families["qwen2_vl"]).codec.name == "json"
    spec = AgentSpec(kind="vlm", path=str(qwen25), vlm=VLMOptions(codec="ui_tars_1_5"))
    assert spec.make().codec.name == "ui_tars_1_5"
    with pytest.raises(ConfigError, match=r"^vlm\.codec 'tars': expected one of json, "):
        VLMOptions(codec="tars")

    agent = VLMAgent.from_pretrained(qwen25, VLMConfig(codec="json"))
    agent.save(tmp_path / "saved")
    meta_file = tmp_path / "saved" / "vlm_agent.json"
    meta = json.loads(meta_file.read_text())
    assert meta["config"]["codec"] == "json"
    del meta["config"]["codec"]  # as every agent saved before codecs
    meta_file.write_text(json.dumps(meta))
    older = VLMAgent.from_pretrained(tmp_path / "saved")
    assert older.codec.name == "json"  # not the family's mobile_use: it was trained on JSON
    assert VLMAgent.from_pretrained(tmp_path / "saved", options=VLMOptions()).codec.name == "json"
    switched = VLMAgent.from_pretrained(tmp_path / "saved", options=VLMOptions(codec="aguvis"))
    assert switched.codec.name == "aguvis"

    # a run saved before codecs resumes speaking JSON; one saved since keeps its choice
    before = upgrade_saved_agent({"kind": "vlm", "path": str(qwen25), "vlm": {"lora": None}})
    assert before["vlm"]["codec"] == "json"
    since = upgrade_saved_agent({"kind": "vlm", "vlm": {"codec": None}})
    assert since["vlm"]["codec"] is None


def test_vlm_run_folders_saved_before_codecs_resume_in_json(tmp_path) -> None:
    """The committed run configs of VLM runs saved before ``agent.vlm.codec`` existed resume
    speaking JSON, the language they trained in; the shipped mobile_use setup, saved and
    resumed, keeps its codec."""
    saved = sorted((Path(__file__).parent / "data" / "saved_configs").glob("*/*vlm*.yaml"))
    assert saved
    resumed = [tmp_path / "today.yaml"]
    save_config(load_config(TrainConfig, shipped_configs()["miniwob-vlm-mobile-use"]), resumed[0])
    for i, path in enumerate([*saved, *resumed]):
        run = RunDir(tmp_path / f"run{i}").create()
        run.config_path.write_text(path.read_text())
        cfg = run.load_config(TrainConfig)
        assert cfg.agent.kind == "vlm"
        assert cfg.agent.vlm.codec == ("mobile_use" if path in resumed else "json"), path
