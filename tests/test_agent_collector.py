"""Every agent runs in the pool's collector on the synthetic device (subprocess workers).

Recorded log-probs must be what a trainer recomputes from the collected steps; weights published
with `set_weights` reach the collector between batches and every step records its version.
"""

import pytest
import torch

import devicerl.pool.pool as pool_mod
import devicerl.runtime.acting.collector as collector_mod
from devicerl.actions import Action, format_autoui
from devicerl.agents.api import APIAgent, APIAgentConfig
from devicerl.agents.autoui import AutoUIAgent, AutoUIConfig
from devicerl.agents.small import SmallAgent
from devicerl.clients import ChatConfig
from devicerl.envs import EnvSpec
from devicerl.runtime.acting.exploration import ExplorationSchedule
from devicerl.runtime.acting.planning import EpisodePlanner
from devicerl.tasks import Task, TaskSampler
from devicerl.testing.autoui_tiny import build_tiny_autoui
from devicerl.testing.chat_server import Reply, ScriptedChatServer

TASKS = [Task("synthetic/tap", max_steps=3, env="synthetic"),
         Task("synthetic/type", max_steps=4, env="synthetic")]  # fmt: skip


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _pool(tasks=None):
    specs = [EnvSpec("synthetic/tap", {"n_boxes": 3, "seed": i}) for i in range(2)]
    tasks = tasks or TaskSampler(TASKS, seed=1)
    return pool_mod.EnvPool(specs, tasks=tasks, worker="subprocess")


def _collect(policy, n_episodes: int = 6):
    with _pool() as pool:
        return collector_mod.Collector(pool, policy).run(n_episodes)


def _check_log_probs(agent, trajectories) -> None:
    steps = [s for t in trajectories for s in t.steps]
    assert steps
    # as a trainer rebuilds them: with the episode's previous actions for agents that read them
    observations = [t.agent_observation(i) for t in trajectories for i in range(len(t.steps))]
    assert all(len(o.previous_actions) == o.step for o in observations)
    with torch.no_grad():
        lp = agent.log_prob(observations, [s.action for s in steps], [s.text for s in steps])
    assert torch.allclose(lp, torch.tensor([s.log_prob for s in steps]), atol=1e-4)


def test_small_agent_in_collector_with_published_weights() -> None:
    learner, actor = SmallAgent(seed=1), SmallAgent(seed=2)
    with _pool() as pool:
        collector = collector_mod.Collector(pool, actor)
        first = collector.run(6)
        actor.set_weights(learner.get_weights(), version=5)  # a learner publishes
        later = collector.run(6)
    assert all(t.is_complete for t in first + later)
    assert {s.policy_version for t in first for s in t.steps} == {0}
    # the publish takes effect at the next action: an episode in flight then (one per device at
    # most, however the devices were scheduled) switches from 0 to 5, every later one is all 5
    versions = [[s.policy_version for s in t.steps] for t in later]
    assert all(v == sorted(v) and set(v) <= {0, 5} for v in versions)
    assert sum(0 in v for v in versions) <= 2
    assert sum(set(v) == {5} for v in versions) >= 4
    _check_log_probs(actor, [t for t in later if t.policy_version == 5])


def test_exploration_level_is_stored_so_log_probs_agree() -> None:
    agent = SmallAgent(seed=3)
    planner = EpisodePlanner(
        TaskSampler(TASKS, seed=1), exploration=ExplorationSchedule(0.6, window=4)
    )
    with _pool(planner) as pool:
        trajectories = []
        for t in collector_mod.Collector(pool, agent).collect(8):
            if not t.is_truncated:
                planner.record(t)  # as the judging stage does, with the device's labels
            trajectories.append(t)
    assert all(t.plan is not None for t in trajectories)
    levels = [t.epsilon for t in trajectories]
    assert all(0.0 <= v <= 0.6 for v in levels) and 0.6 in levels  # unseen tasks: max level
    steps = [s for t in trajectories for s in t.steps]
    recorded = torch.tensor([s.log_prob for s in steps])
    observations = [t.agent_observation(i) for t in trajectories for i in range(t.length)]
    epsilon = [t.epsilon for t in trajectories for _ in range(t.length)]
    with torch.no_grad():
        again = agent.log_prob(observations, [s.action for s in steps], epsilon=epsilon)
        without = agent.log_prob(observations, [s.action for s in steps])
    assert torch.allclose(again, recorded, atol=1e-4)
    assert not torch.allclose(without, recorded, atol=1e-2)  # the level changes log-probs


def test_tiny_autoui_agent_in_collector(tmp_path) -> None:
    agent = AutoUIAgent.from_pretrained(
        *build_tiny_autoui(tmp_path), AutoUIConfig(max_new_tokens=24)
    )
    trajectories = _collect(agent, n_episodes=3)
    assert all(s.text is not None for t in trajectories for s in t.steps)
    _check_log_probs(agent, trajectories)


def test_api_agent_in_collector() -> None:
    def reply(body) -> Reply:
        return Reply("garbage" if len(body["messages"][1]["content"][0]["text"]) % 2 else
                     format_autoui(Action.complete()))  # fmt: skip

    with ScriptedChatServer(reply) as srv:
        agent = APIAgent(APIAgentConfig(chat=ChatConfig(base_url=srv.base_url, model="m")))
        trajectories = _collect(agent, n_episodes=4)
    steps = [s for t in trajectories for s in t.steps]
    assert len(trajectories) == 4 and steps
    assert all(s.log_prob is None for s in steps)
    assert all(s.info.get("invalid_action") for s in steps if s.action.is_invalid)
