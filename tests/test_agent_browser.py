"""Every agent on our browser device (MiniWoB++ pages), alone and in the pool's collector.

Runs once the browser and pool branches are merged (it skips before that, naming why).
"""

import pytest
import torch

import devicerl.envs.browser  # noqa: F401  (the device these tests drive)
import devicerl.pool.pool as pool_mod
import devicerl.runtime.acting.collector as collector_mod
from devicerl.actions import Action, format_autoui
from devicerl.agents.api import APIAgent, APIAgentConfig
from devicerl.agents.autoui import AutoUIAgent, AutoUIConfig
from devicerl.agents.small import SmallAgent
from devicerl.clients import ChatConfig
from devicerl.testing.autoui_tiny import build_tiny_autoui
from devicerl.testing.chat_server import Reply, ScriptedChatServer

pytestmark = [pytest.mark.slow, pytest.mark.browser]

TASKS = ("miniwob/click-button", "miniwob/enter-text", "miniwob/click-link")


def _reply(body) -> Reply:
    """Taps the first listed element when there is a list; otherwise answers junk."""
    text = body["messages"][1]["content"][0]["text"]
    return Reply(format_autoui(Action.tap(0.3, 0.35)) if "UI elements" in text else "hmm")


@pytest.fixture(scope="module")
def agents(tmp_path_factory):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    t5_dir, vision_dir = build_tiny_autoui(tmp_path_factory.mktemp("tiny"))
    with ScriptedChatServer(_reply) as srv:
        yield {
            "small": SmallAgent(),
            "autoui": AutoUIAgent.from_pretrained(
                t5_dir, vision_dir, AutoUIConfig(max_new_tokens=24)
            ),
            "api": APIAgent(APIAgentConfig(chat=ChatConfig(base_url=srv.base_url, model="m"))),
        }
    torch.set_num_threads(threads)


def test_each_agent_acts_on_browser_miniwob_pages(agents) -> None:
    from devicerl.envs import make

    env = make(TASKS[0])
    try:
        for i, task in enumerate(TASKS):
            obs = env.reset(task, seed=i)
            assert obs.elements and obs.screenshot is not None
            for name, agent in agents.items():
                sample = agent.act([obs])[0]
                if agent.trainable:
                    again = agent.log_prob([obs], [sample.action], [sample.text]).detach()
                    assert abs(again.item() - sample.log_prob) <= 1e-4, name
                res = env.step(sample.action)
                if sample.action.is_invalid:
                    assert res.info["invalid_action"] == sample.action.reason
                if res.done:
                    break
                obs = res.observation
    finally:
        env.close()


def test_all_agents_run_in_the_collector_on_browser_devices(agents) -> None:
    from devicerl.envs import EnvSpec

    specs = [EnvSpec(TASKS[0], {}) for _ in range(2)]
    with pool_mod.EnvPool(specs, tasks=",".join(TASKS), worker="subprocess") as pool:
        collector = collector_mod.Collector(pool, agents["small"])
        for name, agent in agents.items():
            collector.source = collector_mod.FixedPolicy(agent)  # the next batch acts with it
            trajectories = collector.run(2)
            assert len(trajectories) == 2, name
            steps = [s for t in trajectories for s in t.steps]
            assert steps and all(t.is_complete for t in trajectories), name
            if agent.trainable:
                assert all(s.log_prob is not None for s in steps), name
