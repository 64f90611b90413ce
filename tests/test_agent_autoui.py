"""The AutoUI-style agent on tiny random-initialised T5 + ViT checkpoints built in code."""

import dataclasses

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from devicerl.actions import Action, ActionType, format_autoui
from devicerl.agents.autoui import AutoUIAgent, AutoUIConfig, LoRASettings, input_text
from devicerl.agents.config import AUTOUI_MAX_INPUT_TOKENS, AUTOUI_PRECISION
from devicerl.envs import make
from devicerl.errors import ConfigError
from devicerl.records import Observation, Step
from devicerl.testing.autoui_tiny import build_tiny_autoui


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """One intra-op thread: on a shared 2-core machine, two spinning OpenMP threads per process
    slow these small models down by an order of magnitude."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_autoui(tmp_path_factory.mktemp("tiny"), autoui_layout=True)


def _obs(kind: str = "tap", n: int = 4) -> list[Observation]:
    env = make(f"synthetic/{kind}", n_boxes=3)
    return [env.reset(seed=s) for s in range(n)]


def _agent(tiny, seed: int = 0, **kw) -> AutoUIAgent:
    config = AutoUIConfig(**{"max_new_tokens": 48, **kw})
    return AutoUIAgent.from_pretrained(*tiny, config, seed=seed)


def test_loads_autoui_layout_with_fusion_inside_t5_weights(tiny) -> None:
    agent = _agent(tiny)
    stored = load_file(str(tiny[0] / "model.safetensors"))
    fusion = agent.module["fusion"].state_dict()
    for name in ("image_dense.weight", "mha_layer.in_proj_weight", "gate_dense.bias"):
        assert torch.equal(fusion[name], stored[name])
    assert agent.vision.dim == 32 and agent.t5.config.d_model == 32
    with pytest.raises(ConfigError, match="vision encoder directory"):
        AutoUIAgent.from_pretrained(tiny[0])


def test_input_text_has_previous_actions_and_goal() -> None:
    obs = Observation("Open settings", (10, 10), previous_actions=(Action.back(),))
    text = input_text(obs, history=4, precision=4)
    assert text.startswith("Previous Actions: Action Plan: [PRESS_BACK]")
    assert text.endswith("Goal: Open settings")


def test_long_history_is_cut_from_the_left_keeping_the_goal(tiny) -> None:
    agent = _agent(tiny, history=50)
    junk = Action.invalid("x " * 1000, "junk")
    obs = Observation("Tap OK", (10, 10), previous_actions=(junk,) * 50)
    text = input_text(obs, 50, AUTOUI_PRECISION)
    ids = agent.tokenizer([text], truncation=True, max_length=AUTOUI_MAX_INPUT_TOKENS).input_ids[0]
    assert len(agent.tokenizer([text]).input_ids[0]) > AUTOUI_MAX_INPUT_TOKENS  # too long
    text = agent.tokenizer.decode(ids, skip_special_tokens=True)
    assert len(ids) == AUTOUI_MAX_INPUT_TOKENS and text.endswith("Goal: Tap OK")
    assert len(agent.act([obs])) == 1


def test_kv_cache_sampling_matches_teacher_forcing(tiny) -> None:
    agent = _agent(tiny, temperature=0.7)
    obs = _obs("type", 4)
    ids, logps = agent.generate(obs)
    assert all(0 < len(x) <= 48 for x in ids)
    recomputed = agent.score_ids(obs, ids)
    assert np.allclose(recomputed.detach().numpy(), logps, atol=1e-4)


def test_act_log_prob_consistency_gradients_and_temperature(tiny) -> None:
    agent = _agent(tiny, temperature=1.5)
    obs = _obs("tap", 3) + _obs("type", 3)
    samples = agent.act(obs)
    texts = [s.text for s in samples]
    lp = agent.log_prob(obs, [s.action for s in samples], texts)
    assert torch.allclose(lp.detach(), torch.tensor([s.log_prob for s in samples]), atol=1e-4)
    lp.sum().backward()
    named = dict(agent.module.named_parameters())
    for name in (
        "t5.encoder.block.0.layer.0.SelfAttention.q.weight",
        "t5.decoder.block.1.layer.1.EncDecAttention.v.weight",
        "fusion.image_dense.weight",
        "fusion.mha_layer.in_proj_weight",
        "fusion.gate_dense.weight",
    ):
        assert named[name].grad is not None and named[name].grad.abs().sum() > 0, name
    assert all(p.grad is None for p in agent.vision.parameters())
    agent.temperature = 1.0
    with torch.no_grad():
        other = agent.log_prob(obs, [s.action for s in samples], texts)
    assert not torch.allclose(other, lp.detach(), atol=1e-3)


def test_fuzzed_model_output_becomes_invalid_noop_actions_the_record_keeps(tiny) -> None:
    agent = _agent(tiny, temperature=3.0)
    with torch.no_grad():  # fuzz: scramble the output layer so generations are junk
        head = agent.t5.lm_head.weight
        head.copy_(torch.randn_like(head) * 5)
    env = make("synthetic/tap", n_boxes=3)
    obs = env.reset(seed=1)
    invalid = 0
    for _ in range(3):
        sample = agent.act([obs])[0]
        assert isinstance(sample.text, str) and np.isfinite(sample.log_prob)
        if not sample.action.is_invalid:
            continue
        invalid += 1
        res = env.step(sample.action)
        assert res.info["invalid_action"] == sample.action.reason
        assert res.observation.elements == obs.elements  # a no-op
        step = Step(obs, sample.action, res.reward, text=sample.text, log_prob=sample.log_prob)
        again = Action.from_json(step.action.to_json())
        assert again.raw == sample.text and again.reason == sample.action.reason
        if res.done:
            break
        obs = res.observation
    assert invalid >= 1


def test_greedy_deterministic_and_save_load_roundtrip(tiny, tmp_path) -> None:
    agent = _agent(tiny)
    obs = _obs("tap", 2)
    a = agent.act(obs, greedy=True)
    assert [s.text for s in a] == [s.text for s in agent.act(obs, greedy=True)]
    agent.version = 3
    agent.save(tmp_path / "saved")
    assert (tmp_path / "saved" / "fusion.safetensors").exists()
    loaded = AutoUIAgent.from_pretrained(tmp_path / "saved")  # vision dir from the json
    assert loaded.version == 3
    acts = [Action.tap(0.5, 0.5), Action.type_text('say "hi", then go')]
    assert torch.allclose(agent.log_prob(obs, acts), loaded.log_prob(obs, acts), atol=1e-5)
    fresh = _agent(tiny, seed=5)
    fresh.set_weights(agent.get_weights(), version=9)
    assert fresh.version == 9
    assert torch.allclose(agent.log_prob(obs, acts), fresh.log_prob(obs, acts), atol=1e-5)


def test_lora_trains_only_adapters_and_fusion(tiny, tmp_path) -> None:
    lora = LoRASettings(r=4, target_modules=("q", "k", "v", "o", "wi", "wo"))
    agent = _agent(tiny, lora=lora)
    names = list(agent.named_trainable())
    assert names and all("lora_" in n or n.startswith("fusion.") for n in names)
    assert any(".wi.lora_A" in n for n in names)
    obs = _obs("type", 2)
    samples = agent.act(obs)
    lp = agent.log_prob(obs, [s.action for s in samples], [s.text for s in samples])
    assert torch.allclose(lp.detach(), torch.tensor([s.log_prob for s in samples]), atol=1e-4)
    lp.sum().backward()
    grads = [p.grad for n, p in agent.named_trainable().items() if "lora_B" in n]
    assert grads and all(g is not None for g in grads)
    opt = torch.optim.SGD(agent.parameters(), lr=1.0)
    opt.step()  # move lora_B off zero so the adapters matter
    agent.save(tmp_path / "lora")
    loaded = AutoUIAgent.from_pretrained(tmp_path / "lora")
    assert loaded.config.lora is not None
    acts = [Action.back(), Action.tap(0.2, 0.3)]
    assert torch.allclose(agent.log_prob(obs, acts), loaded.log_prob(obs, acts), atol=1e-5)
    plain = _agent(tiny)
    assert not torch.allclose(plain.log_prob(obs, acts), loaded.log_prob(obs, acts), atol=1e-3)


def test_a_runs_lora_goes_on_top_of_the_saved_or_default_config(tiny, tmp_path) -> None:
    from devicerl.agents.config import AutoUIOptions
    from devicerl.agents.factory import AgentSpec
    from devicerl.config import load_config

    _agent(tiny, history=2).save(tmp_path / "saved")
    lora = ["autoui.lora.r=4", "autoui.lora.target_modules=[q, v]"]
    spec = load_config(AgentSpec, None, ["kind=autoui", f"path={tmp_path / 'saved'}", *lora])
    assert spec.autoui == AutoUIOptions(lora=LoRASettings(r=4, target_modules=("q", "v")))
    agent = spec.make()
    assert agent.config.max_new_tokens == 48 and agent.config.history == 2  # the saved ones
    assert agent.config.lora == spec.autoui.lora
    names = list(agent.named_trainable())
    assert names and all("lora_" in n or n.startswith("fusion.") for n in names)
    kept = AgentSpec(kind="autoui", path=str(tmp_path / "saved")).make()
    assert kept.config == _agent(tiny, history=2).config  # no options: the saved config
    tuned = AgentSpec(kind="autoui", path=str(tmp_path / "saved"), history=0, temperature=0.5)
    agent = tuned.make()  # the agent-wide settings go on top of the saved ones
    assert (agent.config.history, agent.temperature, agent.config.max_new_tokens) == (0, 0.5, 48)
    bare = AgentSpec(kind="autoui", path=str(tiny[0]), vision_dir=str(tiny[1]), autoui=spec.autoui)
    assert bare.make().config == AutoUIConfig(lora=spec.autoui.lora)  # defaults + the adapters


def test_precomputed_image_features_and_missing_screenshots(tiny) -> None:
    agent = _agent(tiny, max_new_tokens=8)
    obs = _obs("tap", 2)
    feats = agent.vision(obs)
    assert feats.shape == (2, 1, 32)
    given = [dataclasses.replace(o, extras={"image_features": feats[i, 0].numpy()}) for i, o in
             enumerate(obs)]  # fmt: skip
    assert torch.allclose(agent.vision(given), feats, atol=1e-6)
    blank = Observation("Tap the box", (50, 50))
    assert len(agent.act([blank])) == 1


@pytest.mark.slow
def test_tiny_model_learns_the_action_format(tiny) -> None:
    """A few teacher-forced updates make the tiny model emit parseable AutoUI actions."""
    agent = _agent(tiny, max_new_tokens=160)
    obs = _obs("tap", 2)
    target = [Action.back()] * 2
    opt = torch.optim.Adam(agent.parameters(), lr=1e-2)
    losses = []  # trained in eval mode: no dropout, so the run is deterministic
    for _ in range(150):
        loss = -agent.log_prob(obs, target).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] / 10
    out = agent.act(obs, greedy=True)
    assert all(s.action.type is ActionType.PRESS_BACK for s in out), [s.text for s in out]
    assert all(s.text.startswith(format_autoui(Action.back(), precision=4)[:100]) for s in out)
    assert all("rescored" not in s.extras for s in out)


def test_sentencepiece_checkpoint_keeps_log_probs_consistent(tmp_path) -> None:
    """A T5 ``spiece.model`` tokenizer can spell a text several ways: samples whose tokens are
    not the canonical spelling are rescored, so act and log_prob still agree."""
    t5_dir, vision_dir = build_tiny_autoui(tmp_path, tokenizer="spm", autoui_layout=True)
    assert (t5_dir / "spiece.model").exists()
    agent = AutoUIAgent.from_pretrained(t5_dir, vision_dir, AutoUIConfig(max_new_tokens=24))
    obs = _obs("type", 6)
    samples = agent.act(obs)
    lp = agent.log_prob(obs, [s.action for s in samples], [s.text for s in samples])
    assert torch.allclose(lp, torch.tensor([s.log_prob for s in samples]), atol=1e-4)
    text = format_autoui(Action.type_text("hello, world"), precision=4)
    assert agent.decode(agent.target_ids(text)) == text
