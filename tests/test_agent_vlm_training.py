"""Training the vision-language agent: LoRA and full fine-tuning, frozen vision tower, save/load,
gradient checkpointing, DigiRL with its separate critics, and data-parallel learners on real
gloo process groups."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
import torch.multiprocessing as mp
from safetensors.torch import load_file, save_file
from vlm_helpers import SCREEN, observations

from devicerl.actions import Action
from devicerl.agents.scripted import SyntheticOracle
from devicerl.agents.vlm.agent import VLMAgent
from devicerl.agents.vlm.config import VLMConfig, VLMLoRA
from devicerl.agents.vlm.load import is_vision_module
from devicerl.algos.config import ActorConfig, CriticConfig, DigiRLConfig
from devicerl.algos.digirl import DigiRL
from devicerl.envs import make
from devicerl.errors import DataError
from devicerl.records import Trajectory
from devicerl.runtime.acting.rollout import rollout
from devicerl.runtime.distributed.grad_sync import DataParallelSync
from devicerl.tasks import Task
from devicerl.testing.vlm_tiny import build_tiny_vlm

ACTOR = ActorConfig(lr=3e-3, updates=2, batch_size=5, grad_accum=2)
CRITIC = CriticConfig(lr=3e-3, batch_size=7, updates=1)
TAP = Task("synthetic/tap", max_steps=2, env="synthetic")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("vlm")
    return {f: build_tiny_vlm(root / f, f) for f in ("qwen2_5_vl", "idefics3")}


def _agent(path, seed: int = 0, **kw) -> VLMAgent:
    return VLMAgent.from_pretrained(path, VLMConfig(**{"max_new_tokens": 8, **kw}), seed=seed)


def _trained(agent: VLMAgent, steps: int = 2, lr: float = 0.1) -> None:
    obs = observations(2)
    opt = torch.optim.SGD(agent.parameters(), lr=lr)
    for _ in range(steps):
        loss = -agent.log_prob(obs, [Action.back(), Action.tap(0.2, 0.3)]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


@pytest.mark.parametrize("family", ["qwen2_5_vl", "idefics3"])
def test_lora_adapts_the_language_model_only_and_the_gradient_reaches_it(models, family):
    agent = _agent(models[family], lora=VLMLoRA(r=4, target_modules=("q_proj", "v_proj")))
    names = list(agent.named_trainable())
    assert names and all(".lora_" in n for n in names)
    assert not any(is_vision_module(n) for n in names)  # Idefics3's SigLIP has q_proj too
    assert {n.split(".lora_")[0].rsplit(".", 1)[-1] for n in names} == {"q_proj", "v_proj"}
    obs = observations(3)
    lp = agent.log_prob(obs, [Action.back(), Action.home(), Action.tap(0.5, 0.5)])
    lp.sum().backward()
    grads = {n: p.grad for n, p in agent.named_trainable().items()}
    assert all(g is not None and g.abs().sum() > 0 for n, g in grads.items() if "lora_B" in n)
    frozen = [p for n, p in agent.module.named_parameters() if ".lora_" not in n]
    assert all(not p.requires_grad and p.grad is None for p in frozen)
    both = VLMLoRA(r=4, target_modules=("q_proj", "v_proj", "qkv"))  # Qwen's vision: qkv
    vision = _agent(models[family], lora=both)
    assert not any(is_vision_module(n) for n in vision.named_trainable())  # never adapted


def test_full_fine_tuning_keeps_the_vision_tower_frozen(models) -> None:
    agent = _agent(models["qwen2_5_vl"])
    trainable = agent.named_trainable()
    assert trainable and not any(is_vision_module(n) for n in trainable)
    assert any("embed_tokens" in n for n in trainable) and agent.dtype == torch.float32
    vision = [p for n, p in agent.module.named_parameters() if is_vision_module(n)]
    assert vision and not any(p.requires_grad for p in vision)


@pytest.mark.parametrize("lora", [VLMLoRA(r=4), None], ids=["lora", "full"])
def test_save_load_round_trip(models, tmp_path, lora) -> None:
    agent = _agent(models["qwen2_5_vl"], lora=lora, temperature=0.9)
    _trained(agent)
    agent.version = 7
    agent.save(tmp_path / "saved")
    if lora is not None:
        adapter = load_file(str(tmp_path / "saved" / "lora" / "adapter_model.safetensors"))
        assert adapter and all(".lora_" in k for k in adapter)
        assert not (tmp_path / "saved" / "model.safetensors").exists()  # the base is referenced
    loaded = VLMAgent.from_pretrained(tmp_path / "saved")
    assert loaded.version == 7 and loaded.config == agent.config
    obs = observations(3)
    acts = [Action.back(), Action.type_text("hi"), Action.tap(0.25, 0.75)]
    with torch.no_grad():
        expected = agent.log_prob(obs, acts)
        assert torch.allclose(loaded.log_prob(obs, acts), expected, atol=1e-5)
        fresh = _agent(models["qwen2_5_vl"], lora=lora, temperature=0.9)
        assert not torch.allclose(fresh.log_prob(obs, acts), expected, atol=1e-3)
        fresh.set_weights(agent.get_weights(), version=9)
        assert fresh.version == 9
        assert torch.allclose(fresh.log_prob(obs, acts), expected, atol=1e-5)
        fresh.load(tmp_path / "saved")
        assert fresh.version == 7
    if lora is not None:  # only the adapters move between learner and collectors
        assert all(".lora_" in n for n in agent.get_weights())


def test_saved_instructions_and_older_saved_configs_load(models, tmp_path, caplog) -> None:
    """An agent keeps its own instructions; a config saved when the agent had more options
    (fixed in code or chosen at load time now) still loads; an unknown key is refused."""
    agent = VLMAgent.from_pretrained(
        models["idefics3"], VLMConfig(lora=VLMLoRA(r=4), history=2), system_prompt="Tap it."
    )
    agent.save(tmp_path / "saved")
    loaded = VLMAgent.from_pretrained(tmp_path / "saved")
    assert loaded.system_prompt == "Tap it." and loaded.config == agent.config
    other = VLMAgent.from_pretrained(tmp_path / "saved", system_prompt="Other.")
    assert other.system_prompt == "Other."

    meta_file = tmp_path / "saved" / "vlm_agent.json"
    meta = json.loads(meta_file.read_text())
    del meta["system_prompt"]  # older agents kept it in their config, with the other options
    old = {"max_elements": 30, "precision": 3, "system_prompt": "Old words.", "seed": 5,
           "system_role": False, "attn_implementation": "eager", "output_format": "json",
           "train_vision": False}  # fmt: skip
    meta["config"].update(old)
    meta["config"]["lora"]["dropout"] = 0.05
    meta["lora"]["dropout"] = 0.05
    meta["config"]["server"] = {
        "chat": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "max_tokens": 64,
                 "temperature": 0.0, "timeout_s": 60.0, "max_retries": 4},
        "sync": "none", "weights_dir": None, "adapter_prefix": "x", "keep_adapters": 3,
        "checkpoint_endpoint": "/reload", "token_ids": False,
    }  # fmt: skip
    meta_file.write_text(json.dumps(meta))
    older = VLMAgent.from_pretrained(tmp_path / "saved")
    assert older.system_prompt == "Old words." and older.config.history == 2
    assert older.config.lora == VLMLoRA(r=4) and older.config.server is not None
    server = older.config.server
    assert (server.base_url, server.model, server.sync) == ("http://127.0.0.1:9/v1", "m", "none")
    obs, acts = observations(2), [Action.back(), Action.home()]
    with torch.no_grad():  # the same adapters
        again = dataclasses.replace(older.config, server=None)
        same = VLMAgent.from_pretrained(tmp_path / "saved", again, system_prompt="Tap it.")
        assert torch.allclose(same.log_prob(obs, acts), loaded.log_prob(obs, acts), atol=1e-5)

    # an option whose saved value differs from the code's is named in a warning
    meta["config"]["output_format"] = "autoui"
    meta_file.write_text(json.dumps(meta))
    with caplog.at_level("WARNING", logger="devicerl.agents.vlm.config"):
        assert VLMAgent.from_pretrained(tmp_path / "saved").config == older.config
    assert "vlm.output_format='autoui'" in caplog.text and "'json' is used" in caplog.text

    meta["config"]["colour"] = "red"
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(DataError, match="colour"):
        VLMAgent.from_pretrained(tmp_path / "saved")


def test_gradient_checkpointing_gives_the_same_loss_and_gradients(models) -> None:
    obs, acts = observations(3), [Action.back(), Action.home(), Action.tap(0.5, 0.5)]
    grads = []
    for checkpointing in (False, True):
        agent = _agent(models["qwen2_5_vl"], lora=VLMLoRA(r=4), gradient_checkpointing=True)
        if not checkpointing:
            agent.model.activation_checkpointing_disable()
        agent.train()
        on = any(getattr(m, "gradient_checkpointing", False) for m in agent.model.modules())
        assert on == checkpointing
        loss = -agent.log_prob(obs, acts).sum()
        loss.backward()
        grads.append((loss.item(), {n: p.grad.clone() for n, p in agent.named_trainable().items()}))
    (l0, g0), (l1, g1) = grads
    assert abs(l0 - l1) < 1e-4
    assert all(torch.allclose(g0[n], g1[n], atol=1e-5) for n in g0)


def _batch(path) -> list[Trajectory]:
    """Oracle successes (no text: scored on the canonical text) and the tiny VLM's own
    episodes (their generated texts)."""
    env = make("synthetic/tap", n_boxes=3, screen=SCREEN)
    vlm = _agent(path, lora=VLMLoRA(r=4), seed=3)
    data = [rollout(env, SyntheticOracle(), TAP, s) for s in range(3)]
    data += [rollout(env, vlm, TAP, s) for s in range(3, 6)]
    env.close()
    return data


def _learner(path, dtype: str = "float32") -> DigiRL:
    torch.manual_seed(0)
    agent = _agent(path, lora=VLMLoRA(r=4), dtype=dtype, seed=1)
    return DigiRL(agent, DigiRLConfig(top_p=0.5), ACTOR, CRITIC, seed=3)


def _parameters(ln: DigiRL) -> dict[str, torch.Tensor]:
    out = {f"actor.{k}": v for k, v in ln.actor.get_weights().items()}
    for name, module in ln.modules().items():
        out.update({f"{name}.{k}": v.detach().clone() for k, v in module.state_dict().items()})
    return out


def test_digirl_trains_a_vlm_actor_with_its_separate_critics(models) -> None:
    """DigiRL's critics are the separate small networks over the observation (instruction and
    UI elements): they work with any actor, the VLM's adapters learn from the filtered steps."""
    data = _batch(models["qwen2_5_vl"])
    assert any(t.success for t in data) and not all(t.success for t in data)
    assert all(s.text for t in data if not t.success for s in t.steps)
    ln = _learner(models["qwen2_5_vl"])
    before = _parameters(ln)
    metrics = ln.update(data)
    after = _parameters(ln)
    assert metrics["train/actor_samples"] > 0
    moved = {k for k in after if not torch.equal(after[k], before[k])}
    assert any(k.startswith("actor.") and "lora_B" in k for k in moved)
    assert any(k.startswith("step_critic.") for k in moved)
    assert any(k.startswith("instr_critic.") for k in moved)


def _rank(rank: int, world: int, port: int, path: str, data, out: str) -> None:
    from devicerl.runtime.distributed.process_group import init_group, leave

    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)
    init_group(rank, world, "127.0.0.1", port, "gloo", timeout_s=120)
    try:
        ln = _learner(path, "float64")
        ln.grad_sync = DataParallelSync()
        ln.update(data)
        save_file(_parameters(ln), f"{out}/rank{rank}.safetensors")
    finally:
        leave()


@pytest.fixture
def float64():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def test_one_update_on_two_processes_equals_one_process(models, tmp_path, float64) -> None:
    """In float64, as tests/test_ddp.py: the data-parallel update is the same computation."""
    from devicerl.runtime.distributed.process_group import free_port

    path = models["qwen2_5_vl"]
    data = _batch(path)
    single = _learner(path, "float64")
    before = _parameters(single)
    single.update(data)
    expected = _parameters(single)
    lora = [k for k in expected if ".lora_" in k]
    assert lora and all(expected[k].dtype == torch.float64 for k in lora)
    assert max((expected[k] - before[k]).abs().max().item() for k in lora) > 1e-4

    mp.spawn(_rank, args=(2, free_port(), str(path), data, str(tmp_path)), nprocs=2, join=True)
    ranks = [load_file(str(tmp_path / f"rank{r}.safetensors")) for r in range(2)]
    for got in ranks:
        assert got.keys() == expected.keys()
        worst = max((got[k] - expected[k]).abs().max().item() for k in lora)
        assert worst < 1e-5, f"2 processes differ from 1 by {worst:.2e} on the adapters"
        assert max((got[k] - expected[k]).abs().max().item() for k in expected) < 1e-5
    assert all(torch.equal(ranks[0][k], ranks[1][k]) for k in expected)


def test_dtype_follows_the_device_and_the_config(models) -> None:
    assert _agent(models["idefics3"]).dtype == torch.float32  # auto on a CPU
    agent = _agent(models["idefics3"], dtype="bfloat16")
    assert agent.dtype == torch.bfloat16
    assert all(p.dtype == torch.bfloat16 for p in agent.module.parameters())
    samples = agent.act(observations(2))
    assert all(isinstance(s.log_prob, float) for s in samples)
    replaced = dataclasses.replace(agent.config, dtype="float32")
    assert replaced.dtype == "float32"
