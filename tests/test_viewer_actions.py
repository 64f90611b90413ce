"""The report draws and names the newer action types: a long press as a double ring, the
others in the step captions, an invalid OPEN_APP with its reason, the episode's answer."""

import shutil

import pytest
from _runs import devicerl_cli as devicerl

from devicerl.actions import Action
from devicerl.agents.base import FunctionPolicy
from devicerl.envs import make
from devicerl.runtime.acting.rollout import rollout
from devicerl.runtime.runs.folder import RunDir

pytestmark = pytest.mark.browser


def test_report_shows_long_press_wait_open_app_and_answer(tmp_path) -> None:
    from playwright.sync_api import sync_playwright

    script = [
        Action.long_press(0.3, 0.4, 1.5),
        Action.wait(0.2),
        Action.open_app("Clock"),
        Action.answer("4 <b>boxes</b>"),
        Action.complete(),
    ]
    policy = FunctionPolicy(lambda obs: [script.pop(0)])
    env = make("synthetic", screen=(96, 160), seed=3)
    traj = rollout(env, policy, "synthetic/tap", seed=1)
    env.close()
    run = RunDir(tmp_path / "run").create()
    with run.writer() as w:
        w.append(traj)
    r = devicerl("view", str(run.path), "curves=false")
    assert r.returncode == 0, r.stderr
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
        page = browser.new_page()
        page.goto(run.report.joinpath("index.html").as_uri())
        assert page.locator(".step svg.marks circle.press").count() == 2  # one long press
        captions = page.locator(".step figcaption .act").all_inner_texts()
        assert captions == [
            "long_press(0.300, 0.400, 1.5 s)",
            "wait(0.2 s)",
            "open_app('Clock')",
            "answer('4 <b>boxes</b>')",
            "status_task_complete",
        ]
        invalid = page.locator(".step figcaption .invalid").all_inner_texts()
        assert invalid == ["the synthetic device has no apps to open"]
        assert page.locator(".episode .answer").inner_text() == "answer: 4 <b>boxes</b>"
        browser.close()
