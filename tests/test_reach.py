"""Reach of the AitW action space on MiniWoB++: phone-style pickers (real headless Chromium,
checked against the official env), the per-task reach table and the agent's declared kinds."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import pytest

from devicerl.actions import Action
from devicerl.agents.capabilities import ActionKind
from devicerl.agents.small import SmallAgent
from devicerl.cli.main import main as cli_main
from devicerl.envs import make
from devicerl.records import Observation, UIElement
from devicerl.tasks import miniwob as mw
from devicerl.tasks.miniwob_reach import NEEDS, OUTSIDE, reach_rows


def _tap(obs: Observation, el: UIElement) -> Action:
    return Action.tap(*obs.to_normalised(*el.center))


def _find(obs: Observation, role: str, text: str | None = None) -> UIElement | None:
    return next(
        (e for e in obs.elements if e.role == role and (text is None or e.text == text)), None
    )


# -- the table ----------------------------------------------------------------------------------
def test_reach_table_covers_the_whole_suite():
    assert sorted(NEEDS) == sorted(mw.task_names())
    assert set(OUTSIDE) <= set(NEEDS)
    assert all(NEEDS[t] for t in NEEDS)


def test_agent_kinds_come_from_its_config():
    default = SmallAgent().action_kinds
    assert {ActionKind.TAP, ActionKind.SCROLL, ActionKind.TYPE_INSTRUCTION} <= default
    assert not default & {ActionKind.DRAG, ActionKind.POINT, ActionKind.PIXELS}
    taps_only = SmallAgent(allowed_types=("DUAL_POINT",), heads=()).action_kinds
    assert taps_only == {ActionKind.TAP, ActionKind.SELECT}
    rows = {r.task: r for r in reach_rows(["miniwob/enter-text", "drag-box"], taps_only)}
    assert rows["enter-text"].missing == (ActionKind.TYPE_INSTRUCTION,)
    assert not rows["enter-text"].reachable
    assert rows["drag-box"].missing == (ActionKind.DRAG,)
    with pytest.raises(KeyError, match="no-such-task"):
        reach_rows(["miniwob/no-such-task"], taps_only)


def test_cli_reach_report(tmp_path):
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli_main(["tasks", "--reach", "miniwob"]) == 0
    lines = out.getvalue().splitlines()
    by_task = {line.split()[0]: line for line in lines[2:] if line and not line.startswith(" ")}
    assert by_task["click-test"].split()[1] == "yes"
    assert by_task["drag-box"].split()[1] == "no" and "drag*" in by_task["drag-box"]
    assert by_task["draw-circle"].split()[1] == "outside"
    assert lines[-1].startswith("agent reaches ") and f"/{len(NEEDS)} tasks" in lines[-1]
    reach = len(NEEDS) - len(OUTSIDE)
    switches = ["point_actions=true", "page_text=true", "free_text=true"]  # an older layout
    for heads in (["heads=[points,page_text,free_text]"], switches):
        full = io.StringIO()
        with redirect_stdout(full):
            options = [*heads, "features.pixels=true"]
            argv = ["tasks", "--reach", "miniwob", *(f"--agent-set={o}" for o in options)]
            assert cli_main(argv) == 0
        assert full.getvalue().splitlines()[-1].startswith(f"agent reaches {reach}/{len(NEEDS)} ")
    with redirect_stdout(io.StringIO()):
        assert cli_main(["tasks", "--reach", "miniwob", "--agent", str(tmp_path)]) == 2
        assert cli_main(["tasks", "--reach", "miniwob", "--agent-set", "no_such=1"]) == 2


# -- pickers on real Chromium --------------------------------------------------------------------
@pytest.fixture(scope="module")
def env():
    device = make("miniwob")
    yield device
    device.close()


@pytest.mark.browser
def test_select_opens_a_picker_of_tappable_options(env):
    for seed in range(3):
        obs = env.reset("miniwob/choose-list", seed=seed)
        target = obs.extras["fields"]["target"]
        assert _find(obs, "option") is None
        obs = env.step(_tap(obs, _find(obs, "combobox"))).observation
        option = _find(obs, "option", target)
        assert option is not None, [e.text for e in obs.elements]
        assert obs.screenshot is not None
        obs = env.step(_tap(obs, option)).observation
        assert _find(obs, "combobox").value == target
        assert _find(obs, "option") is None  # the picker closed
        result = env.step(_tap(obs, _find(obs, "button", "Submit")))
        assert result.reward == 1.0 and result.info["raw_reward"] > 0


@pytest.mark.browser
def test_multiple_select_picker_toggles_options(env):
    obs = env.reset("miniwob/click-scroll-list", seed=1)
    targets = obs.extras["fields"]["target"].split(", ")
    obs = env.step(_tap(obs, _find(obs, "combobox"))).observation
    rows = [e for e in obs.elements if e.attrs.get("class") == "__drl-picker-row"]
    assert len(rows) >= 8
    for name in targets:
        row = next(e for e in obs.elements if e.attrs.get("class") == "__drl-picker-row"
                   and e.text == name)  # fmt: skip
        if row.bbox[3] > obs.screen_size[1] - 2:  # below the fold: swipe the list up
            obs = env.step(Action.swipe(0.5, 0.8, 0.5, 0.3)).observation
            row = next(e for e in obs.elements if e.text == name and e.role == "label")
        obs = env.step(_tap(obs, row)).observation
    obs = env.step(_tap(obs, _find(obs, "button", "Done"))).observation
    assert _find(obs, "button", "Done") is None
    result = env.step(_tap(obs, _find(obs, "button", "Submit")))
    assert result.info["raw_reward"] > 0


def _scroll_text_to_bottom(device) -> float:
    """Swipe up inside scroll-text-2's text area (seed 0 asks for the bottom), then submit."""
    obs = device.reset("miniwob/scroll-text-2", seed=0)
    assert obs.extras["fields"]["target"] == "bottom"
    area = next(e for e in obs.elements if e.attrs.get("tag") == "textarea")
    (x, _), (top, bottom) = area.center, (area.bbox[1], area.bbox[3])
    for _ in range(6):
        up = Action.swipe(*obs.to_normalised(x, bottom - 8), *obs.to_normalised(x, top + 8))
        obs = device.step(up).observation
    return device.step(_tap(obs, _find(obs, "button", "Submit"))).info["raw_reward"]


@pytest.mark.browser
def test_swipe_scrolls_a_text_area_as_a_finger_does(env):
    assert _scroll_text_to_bottom(env) > 0


@pytest.mark.browser
def test_without_phone_controls_taps_and_swipes_cannot_reach_them():
    device = make("miniwob", phone_controls=False)
    try:
        obs = device.reset("miniwob/choose-list", seed=0)
        obs = device.step(_tap(obs, _find(obs, "combobox"))).observation
        assert _find(obs, "option") is None  # the desktop pop-up: nothing to tap
        assert _scroll_text_to_bottom(device) < 0  # a mouse drag selects text, scrolls nothing
    finally:
        device.close()


@pytest.mark.browser
def test_picker_choice_scores_as_on_the_official_env(env):
    """Same seeds, same instance on both envs; the option picked through our picker scores as
    the one the official env picks through the select's keyboard type-ahead."""
    from miniwob_harness.official import official_env

    with official_env("choose-list") as off:
        from miniwob.action import ActionTypes

        for seed in range(3):
            theirs, _ = off.reset(seed=seed)
            obs = env.reset("miniwob/choose-list", seed=seed)
            assert theirs["utterance"] == obs.instruction
            target = obs.extras["fields"]["target"]
            obs = env.step(_tap(obs, _find(obs, "combobox"))).observation
            obs = env.step(_tap(obs, _find(obs, "option", target))).observation
            ours = env.step(_tap(obs, _find(obs, "button", "Submit")))
            sel = next(e for e in theirs["dom_elements"] if e["tag"] == "select")
            btn = next(e for e in theirs["dom_elements"] if e["text"] == "Submit")
            u = off.unwrapped
            off.step(u.create_action(ActionTypes.FOCUS_ELEMENT_AND_TYPE_TEXT, ref=sel["ref"],
                                     text=target))  # fmt: skip
            *_, info = off.step(u.create_action(ActionTypes.CLICK_ELEMENT, ref=btn["ref"]))
            assert ours.info["raw_reward"] == info["raw_reward"] == 1.0


@pytest.mark.browser
def test_date_and_time_inputs_take_the_typed_text(env):
    import re

    for task, want in (("enter-date", "2010-05-20"), ("enter-time", "21:37")):
        obs = env.reset(f"miniwob/{task}", seed=0)
        typed = re.search(r"Enter (.+?) as the", obs.instruction).group(1)  # 05/20/2010, 9:37 PM
        obs = env.step(_tap(obs, _find(obs, "textbox"))).observation  # the centre: no segment
        obs = env.step(Action.type_text(typed)).observation
        assert _find(obs, "textbox").value == want, task
        result = env.step(_tap(obs, _find(obs, "button", "Submit")))
        assert result.info["raw_reward"] > 0, task


# -- scripted solvers: the agent's vocabulary reaches every kind -------------------------------
#: One task per kind (with the kinds they cover): select, tap, scroll, type spans of the
#: instruction / page / computed text, Enter, free points, drags and pixels.
SOLVER_SAMPLE = ("click-scroll-list", "enter-date", "copy-paste", "terminal", "find-midpoint",
                 "drag-box", "click-color")  # fmt: skip


@pytest.mark.browser
def test_scripted_solvers_cover_every_kind(env):
    from reach_solvers import SOLVERS, run_episode  # benchmarks/ (see conftest.py)

    covered = set()
    for task in SOLVER_SAMPLE:
        episode, _ = run_episode(env, task, seed=3)
        assert episode.success, (task, episode)
        covered |= set(SOLVERS[task].kinds)
    assert covered == set(ActionKind)
