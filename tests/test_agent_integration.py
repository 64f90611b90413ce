"""Agents end to end: episodes on the synthetic device, stored, read back and re-scored.

The log-prob recorded at sampling time must be what a trainer recomputes from the stored data
(observation, action, generated text); invalid actions from bad model output are kept.
"""

import pytest
import torch

from devicerl.actions import Action, format_autoui
from devicerl.agents.api import APIAgent, APIAgentConfig
from devicerl.agents.autoui import AutoUIAgent, AutoUIConfig
from devicerl.agents.small import SmallAgent
from devicerl.clients import ChatClient, ChatConfig
from devicerl.data.store import TrajectoryStore, TrajectoryWriter
from devicerl.envs import make
from devicerl.runtime.acting.rollout import rollout
from devicerl.testing.autoui_tiny import build_tiny_autoui
from devicerl.testing.chat_server import Reply, ScriptedChatServer

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _episodes(agent, tmp_path, n: int = 3):
    env = make("synthetic/type", n_boxes=3)
    with TrajectoryWriter(tmp_path / "store") as writer:
        for seed in range(n):
            writer.append(rollout(env, agent, "synthetic/type", seed))
    return TrajectoryStore(tmp_path / "store").read_all()


def _rescore(agent, trajectories) -> tuple[torch.Tensor, torch.Tensor]:
    """Recompute log-probs as a learner does: from the stored steps, with the episode's earlier
    actions for agents that read them."""
    steps = [s for t in trajectories for s in t.steps]
    observations = [
        t.agent_observation(i) if agent.uses_history else t.steps[i].observation
        for t in trajectories
        for i in range(t.length)
    ]
    with torch.no_grad():
        lp = agent.log_prob(observations, [s.action for s in steps], [s.text for s in steps])
    return lp, torch.tensor([s.log_prob for s in steps])


def test_small_agent_episodes_store_and_rescore(tmp_path) -> None:
    agent = SmallAgent(temperature=1.2)
    trajectories = _episodes(agent, tmp_path)
    assert len(trajectories) == 3 and all(t.is_complete for t in trajectories)
    lp, recorded = _rescore(agent, trajectories)
    assert torch.allclose(lp, recorded, atol=1e-4)


def test_autoui_agent_episodes_store_and_rescore(tmp_path) -> None:
    t5_dir, vision_dir = build_tiny_autoui(tmp_path / "model")
    agent = AutoUIAgent.from_pretrained(t5_dir, vision_dir, AutoUIConfig(max_new_tokens=32))
    trajectories = _episodes(agent, tmp_path, n=2)
    steps = [s for t in trajectories for s in t.steps]
    assert steps and all(s.text is not None for s in steps)
    invalid = [s for s in steps if s.action.is_invalid]
    assert all(s.info["invalid_action"] == s.action.reason for s in invalid)
    lp, recorded = _rescore(agent, trajectories)
    assert torch.allclose(lp, recorded, atol=1e-4)


def test_api_agent_episodes_keep_invalid_steps(tmp_path) -> None:
    """A reply that does not parse is an invalid step, kept with its text; an unreadable reply
    body spends the episode's failure budget (one attempt here), after which the episode's
    actions are invalid without a request, each kept with the reason."""
    with ScriptedChatServer(lambda body: Reply(format_autoui(Action.back()))) as srv:
        srv.push("no idea", format_autoui(Action.complete()), Reply(garbage=True))
        cfg = ChatConfig(base_url=srv.base_url, model="m")
        agent = APIAgent(APIAgentConfig(chat=cfg), ChatClient(cfg, max_retries=0))
        answered, failed = _episodes(agent, tmp_path, n=2)
        assert len(srv.requests) == 3
    first, last = answered.steps
    assert first.action.is_invalid and first.text == "no idea"
    assert first.action.raw == "no idea" and first.info["invalid_action"]
    assert last.action == Action.complete() and answered.end_reason.value == "agent_ended"
    head, *rest = failed.steps
    assert head.action.is_invalid and "unreadable reply body" in head.action.reason
    assert rest and all("API not asked" in s.action.reason for s in rest)
