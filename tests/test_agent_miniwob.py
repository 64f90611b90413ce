"""Every agent acts on real MiniWoB++ pages (the package's own Selenium env, headless Chromium).

The observation conversion here is deliberately minimal (the browser device owns the real one):
DOM elements become `UIElement`s, the screenshot is passed as is. Taps and typing are executed
through MiniWoB's own actions, so the agents' outputs really drive the pages.
"""

import os
import shutil

import numpy as np
import pytest
import torch
from _runs import element_at

from devicerl.actions import Action, ActionType, format_autoui
from devicerl.agents.api import APIAgent, APIAgentConfig
from devicerl.agents.autoui import AutoUIAgent, AutoUIConfig
from devicerl.agents.small import SmallAgent
from devicerl.clients import ChatConfig
from devicerl.records import Observation, UIElement
from devicerl.testing.autoui_tiny import build_tiny_autoui
from devicerl.testing.chat_server import Reply, ScriptedChatServer

pytestmark = [
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.skipif(
        shutil.which("chromedriver") is None, reason="needs chromium + chromedriver (make setup)"
    ),
]
TASKS = ("miniwob/enter-text-v1", "miniwob/click-button-v1", "miniwob/login-user-v1")
EDITABLE = ("input_text", "input_password", "textarea")


def _observation(raw: dict) -> Observation:
    h, w = raw["screenshot"].shape[:2]
    elements = []
    for d in raw["dom_elements"]:
        left, top = float(d["left"][0]), float(d["top"][0])
        tag = str(d["tag"])
        elements.append(
            UIElement(
                id=str(d["ref"]),
                role=tag,
                text=str(d["text"]),
                value=str(d["value"]),
                bbox=(left, top, left + float(d["width"][0]), top + float(d["height"][0])),
                clickable=bool(d["flags"][3]) or tag in ("button", "a", *EDITABLE),
                focused=bool(d["flags"][0]),
                editable=tag in EDITABLE,
            )
        )
    return Observation(str(raw["utterance"]), (w, h), np.asarray(raw["screenshot"]), elements)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    import gymnasium
    import miniwob
    from miniwob.action import ActionTypes

    os.environ.setdefault("MINIWOB_CHROME_BINARY", shutil.which("chromium") or "chromium")
    os.environ.setdefault("MINIWOB_CHROMEDRIVER", shutil.which("chromedriver") or "")
    gymnasium.register_envs(miniwob)
    # Chromium leaves org.chromium.* folders in TMPDIR: give it one we delete afterwards.
    chrome_tmp, old_tmp = tmp_path_factory.mktemp("chromium"), os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(chrome_tmp)
    try:
        envs = [gymnasium.make(t) for t in TASKS]
        for e in envs:
            e.reset(seed=0)  # starts the browser (inside our TMPDIR)
    finally:
        if old_tmp is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old_tmp

    def reset() -> list[Observation]:
        return [_observation(e.reset(seed=i)[0]) for i, e in enumerate(envs)]

    def execute(i: int, obs: Observation, action: Action) -> None:
        env = envs[i].unwrapped
        if action.is_tap:
            coords = np.array(obs.to_pixels(*action.touch), dtype=np.float32)
            envs[i].step(env.create_action(ActionTypes.CLICK_COORDS, coords=coords))
        elif action.type is ActionType.TYPE:
            envs[i].step(env.create_action(ActionTypes.TYPE_TEXT, text=action.text))

    torch_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield reset, execute
    torch.set_num_threads(torch_threads)
    for e in envs:
        e.close()
    shutil.rmtree(chrome_tmp, ignore_errors=True)


def _drive(agent, pages) -> list:
    reset, execute = pages
    observations = reset()
    assert all(o.elements and o.instruction for o in observations)
    samples = agent.act(observations)
    assert len(samples) == len(observations)
    for i, (obs, sample) in enumerate(zip(observations, samples)):
        execute(i, obs, sample.action)  # invalid and terminal actions are no-ops
    return samples, observations


def test_small_agent_on_miniwob(pages) -> None:
    agent = SmallAgent()
    samples, observations = _drive(agent, pages)
    assert not any(s.action.is_invalid for s in samples)
    lp = agent.log_prob(observations, [s.action for s in samples])
    assert torch.allclose(lp.detach(), torch.tensor([s.log_prob for s in samples]), atol=1e-4)
    for s, o in zip(samples, observations):  # taps land on element centres, text is copied
        if s.action.is_tap:
            assert element_at(o, *s.action.touch) is not None
        if s.action.type is ActionType.TYPE:
            assert s.action.text in o.instruction


def test_tiny_autoui_agent_on_miniwob(pages, tmp_path) -> None:
    agent = AutoUIAgent.from_pretrained(
        *build_tiny_autoui(tmp_path), AutoUIConfig(max_new_tokens=32)
    )
    samples, observations = _drive(agent, pages)
    texts = [s.text for s in samples]
    lp = agent.log_prob(observations, [s.action for s in samples], texts)
    assert torch.allclose(lp.detach(), torch.tensor([s.log_prob for s in samples]), atol=1e-4)


def test_api_agent_on_miniwob(pages) -> None:
    def reply(body) -> Reply:
        text = body["messages"][1]["content"][0]["text"]
        if "Submit" in text:  # taps the first listed element
            return Reply(format_autoui(Action.tap(0.5, 0.45)))
        return Reply("cannot parse this")

    with ScriptedChatServer(reply) as srv:
        agent = APIAgent(APIAgentConfig(chat=ChatConfig(base_url=srv.base_url, model="m")))
        samples, _ = _drive(agent, pages)
        assert len(srv.requests) == len(TASKS)
        for req in srv.requests:
            assert req.body["messages"][1]["content"][1]["type"] == "image_url"
    assert any(s.action.is_tap for s in samples)
    assert all(s.action.is_tap or s.action.is_invalid for s in samples)
