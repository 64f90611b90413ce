"""A tiny vision-language model measurably learns a two-choice task on the synthetic device with
DigiRL, online, through its LoRA adapters: it fails if the gradient does not reach them."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from vlm_helpers import two_choices

import devicerl.pool.pool as pool_mod
import devicerl.runtime.acting.collector as collector_mod
from devicerl.agents.vlm.agent import VLMAgent
from devicerl.agents.vlm.config import VLMConfig, VLMLoRA
from devicerl.algos.config import ActorConfig, CriticConfig, DigiRLConfig
from devicerl.algos.digirl import DigiRL
from devicerl.envs import EnvSpec
from devicerl.tasks import Task, TaskSampler
from devicerl.testing.vlm_tiny import build_tiny_vlm

SEED, SCREEN = 3, (64, 96)
#: A tiny random model's output layer bounds its logits: the adapters include it.
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head")
CONFIG = VLMConfig(max_new_tokens=24, history=0)
INSTRUCTIONS = "Tap the box the instruction names. Reply with one JSON action."


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _choices():
    """The instance's screen and its two taps (one decimal: short texts)."""
    return two_choices(SEED, decimals=1)


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """A base model that writes both taps, the wrong one twice as often (imitation of the
    format, as a real checkpoint knows it)."""
    root = tmp_path_factory.mktemp("vlm")
    base = build_tiny_vlm(root / "base", "qwen2_vl")
    agent = VLMAgent.from_pretrained(base, CONFIG, system_prompt=INSTRUCTIONS)
    obs, good, bad = _choices()
    opt = torch.optim.Adam(agent.parameters(), lr=5e-3)  # 1.5e-2 diverged on an AMD EPYC
    for _ in range(160):
        loss = -agent.log_prob([obs] * 3, [good, bad, bad]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    agent.save(root / "pretrained")
    return root / "pretrained"


def test_tiny_vlm_learns_the_two_choice_task_through_its_adapters(pretrained) -> None:
    obs, good, bad = _choices()
    lora = VLMLoRA(r=8, alpha=16, target_modules=TARGETS)
    agent = VLMAgent.from_pretrained(pretrained, dataclasses.replace(CONFIG, lora=lora))
    assert agent.system_prompt == INSTRUCTIONS  # saved with the pretrained agent

    def p_good() -> float:
        with torch.no_grad():
            return float(torch.softmax(agent.log_prob([obs, obs], [good, bad]), 0)[0])

    start = p_good()
    assert 0.1 < start < 0.45  # both choices sampled, the wrong one more often
    frozen = {
        n: p.detach().clone() for n, p in agent.module.named_parameters() if ".lora_" not in n
    }
    adapters = {n: p.detach().clone() for n, p in agent.named_trainable().items()}
    actor, critic = ActorConfig(lr=1e-2, updates=8, batch_size=8), CriticConfig(batch_size=16)
    learner = DigiRL(agent, DigiRLConfig(top_p=0.5), actor, critic, seed=0)
    tasks = [Task("synthetic/tap", max_steps=3, env="synthetic", params={"n_boxes": 2})]
    specs = [
        EnvSpec("synthetic/tap", {"n_boxes": 2, "seed": i, "screen": SCREEN}) for i in range(4)
    ]
    sampler = TaskSampler(tasks, seed=1, seeds=(SEED, SEED + 1))  # one instance, two boxes
    replay, success = [], []
    with pool_mod.EnvPool(specs, tasks=sampler, worker="serial") as pool:
        collector = collector_mod.Collector(pool, agent)
        for _ in range(3):
            batch = collector.run(16)  # sampled from the current version
            success.append(sum(t.success for t in batch) / len(batch))
            replay += batch
            learner.update(replay)
    assert p_good() > 0.85, (start, p_good())
    assert success[-1] > success[0] + 0.3, success
    now = dict(agent.module.named_parameters())
    assert all(torch.equal(frozen[n], now[n]) for n in frozen)  # only the adapters moved
    moved = [n for n, p in agent.named_trainable().items() if not torch.equal(p, adapters[n])]
    assert any("lora_B" in n for n in moved) and any("lora_A" in n for n in moved)
