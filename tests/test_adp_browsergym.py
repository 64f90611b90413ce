"""An ADP round trip over a run of the BrowserGym device (real BrowserGym in its own
environment, MiniWoB++ offline, the system Chromium): the page's url, viewport, screenshot and
elements (BrowserGym ids) and the actions come back bit for bit."""

from __future__ import annotations

import pytest
from adp_helpers import Script, round_trip, same

from devicerl.actions import Action
from devicerl.envs import make
from devicerl.envs.browsergym.env import REQUIREMENTS
from devicerl.envs.foreign.venv import ensure_env
from devicerl.runtime.acting.rollout import rollout

pytestmark = pytest.mark.browser

TASK = "browsergym/miniwob.click-test"


@pytest.mark.timeout(600)
def test_browsergym_runs_round_trip_exactly(tmp_path) -> None:
    env = make("browsergym", python=str(ensure_env(REQUIREMENTS)))
    try:
        obs = env.reset(TASK, seed=0)
        button = next(e for e in obs.elements if e.role == "button")
        tap = Action.tap(*obs.to_normalised(*button.center))
        played = rollout(env, Script([Action.type_text("x"), tap]), TASK, 0)
    finally:
        env.close()
    assert played.success and played.device == "browsergym"
    (back,), (line,) = round_trip([played], tmp_path)
    same(played, back)
    screens = [c for c in line["content"] if c["class_"] == "web_observation"]
    assert screens and all(s["url"] and s["image_observation"] for s in screens)
    functions = [c["function"] for c in line["content"] if c["class_"] == "api_action"]
    assert functions == ["keyboard_type", "mouse_click"]
