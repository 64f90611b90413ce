"""The API agent against a real loopback chat-completions server."""

import json
import threading
import time

import pytest

from devicerl.actions import VALID_TYPES, Action, ActionType, format_autoui, parse_autoui
from devicerl.agents import require_trainable
from devicerl.agents.api import APIAgent, APIAgentConfig
from devicerl.clients import ChatClient, ChatConfig
from devicerl.clients.chat import ChatAuthError
from devicerl.codecs import MobileUse
from devicerl.codecs.autoui import action_space_doc, system_prompt
from devicerl.codecs.docs import ACTION_DOCS
from devicerl.envs import make
from devicerl.errors import ConfigError
from devicerl.records import Observation, Step, with_previous_actions
from devicerl.testing.chat_server import Reply, ScriptedChatServer


def _agent(
    srv: ScriptedChatServer, temperature: float = 0.0, max_retries: int | None = None, **chat
) -> APIAgent:
    cfg = ChatConfig(base_url=srv.base_url, model="vlm", **chat)
    client = ChatClient(cfg, temperature=temperature, max_retries=max_retries)
    return APIAgent(APIAgentConfig(chat=cfg), client, temperature=temperature)


def _obs(n: int = 1) -> list[Observation]:
    env = make("synthetic/tap", n_boxes=3)
    return [env.reset(seed=s) for s in range(n)]


def test_docs_cover_every_action_type_and_examples_round_trip() -> None:
    assert {d.type for d in ACTION_DOCS} == set(VALID_TYPES)
    doc = action_space_doc(precision=3)
    for d in ACTION_DOCS:
        for example in d.examples:
            text = format_autoui(example, precision=3)
            assert text in doc
            assert parse_autoui(text) == example
    assert doc in system_prompt(3)


def test_acts_from_replies_and_sends_screenshot_prompt_and_key(monkeypatch) -> None:
    monkeypatch.setenv("VLM_KEY", "sk-test-123")
    obs = _obs(1)[0]
    target = next(e for e in obs.elements if obs.instruction.endswith(e.text))
    x, y = obs.to_normalised(*target.center)
    reply = "Sure. " + format_autoui(Action.tap(x, y), precision=4)
    with ScriptedChatServer(lambda body: Reply(reply)) as srv:
        agent = _agent(srv, api_key_env="VLM_KEY")
        obs = with_previous_actions(obs, [Action.back()])
        sample = agent.act([obs])[0]
        assert sample.action.is_tap and sample.text == reply
        assert sample.action.touch == pytest.approx((x, y), abs=1e-4)
        assert sample.log_prob is None
        body = srv.requests[0].body
        assert srv.requests[0].headers["Authorization"] == "Bearer sk-test-123"
        system, user = body["messages"]
        assert "DUAL_POINT" in system["content"] and "STATUS_TASK_IMPOSSIBLE" in system["content"]
        text, image = user["content"]
        assert obs.instruction in text["text"] and repr(target.text) in text["text"]
        assert "PRESS_BACK" in text["text"]  # previous actions
        assert image["image_url"]["url"].startswith("data:image/png;base64,")
        blind = make("synthetic/tap", n_boxes=3, render=False).reset(seed=0)  # no screenshot
        assert blind.screenshot is None
        agent.act([blind])
        assert [p["type"] for p in srv.requests[-1].body["messages"][1]["content"]] == ["text"]
        bare = APIAgent(agent.config, agent.client, history=0, include_elements=False)
        text = bare.messages(obs)[1]["content"][0]["text"]
        assert "Previous actions: none" in text and "UI elements" not in text
        assert not bare.uses_history and agent.uses_history
    with pytest.raises(ConfigError, match="history"):
        APIAgent(agent.config, agent.client, history=-1)
    env = make("synthetic/tap", n_boxes=3)
    env.reset(seed=0)
    assert env.step(sample.action).info["success"]


def test_a_served_gui_model_is_prompted_and_read_in_its_own_language() -> None:
    """With Qwen2.5-VL's codec the endpoint gets the ``mobile_use`` tool and the screenshot's
    resized resolution; its tool call, in pixels of that resized image, lands on the box."""
    obs = with_previous_actions(_obs(1)[0], [Action.back()])
    target = next(e for e in obs.elements if obs.instruction.endswith(e.text))
    geometry = MobileUse.served(obs.screenshot.shape[1], obs.screenshot.shape[0])
    (w, h), (x, y) = geometry.size, obs.to_normalised(*target.center)
    call = {
        "name": "mobile_use",
        "arguments": {"action": "click", "coordinate": [round(x * w), round(y * h)]},
    }
    reply = f"<tool_call>\n{json.dumps(call)}\n</tool_call>"  # fmt: skip
    with ScriptedChatServer(lambda body: Reply(reply)) as srv:
        cfg = ChatConfig(base_url=srv.base_url, model="qwen")
        agent = APIAgent(APIAgentConfig(chat=cfg), ChatClient(cfg), codec=MobileUse())
        sample = agent.act([obs])[0]
        system, user = srv.requests[0].body["messages"]
    assert f"The screen's resolution is {w}x{h}." in system["content"]
    assert "<tools>" in system["content"] and "DUAL_POINT" not in system["content"]
    text, image = user["content"]  # the query, then the screenshot, as Qwen's cookbook
    assert text["text"].startswith(f"The user query: {obs.instruction}\n")
    assert '"button": "Back"' in text["text"] and image["type"] == "image_url"
    env = make("synthetic/tap", n_boxes=3)
    env.reset(seed=0)
    assert sample.text == reply and env.step(sample.action).info["success"]


def test_failures_and_garbage_become_invalid_actions_never_exceptions() -> None:
    with ScriptedChatServer(lambda body: Reply("I think I should look around first.")) as srv:
        agent = _agent(srv, max_retries=1, timeout_s=0.3)
        srv.push(Reply(status=500), Reply(status=503))  # retries spent -> ChatError
        srv.push(Reply(garbage=True), Reply(garbage=True))
        srv.push(Reply(status=429), Reply(delay_s=1.0), Reply(delay_s=1.0))
        srv.push(Reply(status=404))
        obs = _obs(1)[0]
        out = [agent.act([obs])[0] for _ in range(5)]
        srv.push(Reply(status=401))  # a refused key is no invalid action: it stops the run
        with pytest.raises(
            ChatAuthError, match=r"HTTP 401 .*name the key.s variable in api_key_env"
        ):
            agent.act([obs])
    reasons = [s.action.reason for s in out]
    assert all(s.action.is_invalid for s in out)
    assert "gave up after 2 attempts" in reasons[0] and "HTTP 503" in reasons[0]
    assert "unreadable reply body" in reasons[1]
    assert "timed out" in reasons[2]
    assert "HTTP 404" in reasons[3]
    assert reasons[4] == "no action_type found" and out[4].text.startswith("I think")
    env = make("synthetic/tap", n_boxes=3)
    env.reset(seed=0)
    for s in out:
        res = env.step(s.action)
        assert res.info["invalid_action"] == s.action.reason and not res.terminated
        step = Step(res.observation, s.action, res.reward, info=res.info, text=s.text)
        kept = Action.from_json(step.action.to_json())
        assert kept.is_invalid and kept.reason == s.action.reason


def test_batch_runs_concurrently_within_the_cap() -> None:
    active, peak, lock = [0], [0], threading.Lock()

    def slow(body):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.5)  # long enough for all three workers to be in flight at once
        with lock:
            active[0] -= 1
        return Reply(format_autoui(Action.enter()))

    with ScriptedChatServer(slow) as srv:
        agent = _agent(srv, max_concurrency=3)
        out = agent.act(_obs(6))
    assert [s.action.type for s in out] == [ActionType.PRESS_ENTER] * 6
    assert peak[0] == 3  # three in flight at once, never more


def test_greedy_sends_temperature_zero_and_agent_is_not_trainable() -> None:
    with ScriptedChatServer(lambda body: Reply(format_autoui(Action.home()))) as srv:
        agent = _agent(srv, temperature=0.8)
        agent.act(_obs(1), greedy=True)
        agent.act(_obs(1))
        assert [r.body["temperature"] for r in srv.requests] == [0.0, 0.8]
    with pytest.raises(NotImplementedError, match="evaluated, not trained"):
        agent.log_prob(_obs(1), [Action.home()])
    with pytest.raises(ConfigError, match="APIAgent has no log-probabilities"):
        require_trainable(agent)
