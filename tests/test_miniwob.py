"""MiniWoB++ on our browser device (real headless Chromium), checked against the official env."""

from __future__ import annotations

import io
import time
from contextlib import redirect_stdout

import pytest
from miniwob_harness.oracle import MiniWoBOracle

from devicerl.actions import Action
from devicerl.cli.main import main as cli_main
from devicerl.envs import make
from devicerl.errors import ConfigError
from devicerl.records import Observation
from devicerl.tasks import TaskSampler, resolve
from devicerl.tasks import miniwob as mw

pytestmark = pytest.mark.browser

DEV = ["click-test", "click-test-2", "click-button", "click-link", "click-dialog", "click-tab",
       "focus-text", "enter-text"]  # fmt: skip


@pytest.fixture(scope="module")
def env():
    device = make("miniwob")
    yield device
    device.close()


def _tap(obs: Observation, element) -> Action:
    return Action.tap(*obs.to_normalised(*element.center))


def test_suite_lists_every_shipped_task_with_budgets():
    root = mw.html_dir()
    shipped = {p.stem for p in (root / "miniwob").glob("*.html")}
    shipped |= {f"flight.{p.parent.name}" for p in (root / "flight").glob("*/wrapper.html")}
    tasks = resolve("miniwob")
    assert {t.short_name for t in tasks} == shipped and len(shipped) >= 130
    assert all(t.max_steps == mw.step_budget(t.short_name) and t.env == "browser" for t in tasks)
    assert [t.short_name for t in resolve("miniwob-dev")] == DEV
    assert {t.short_name for t in resolve("miniwob/click-tab*")} >= {"click-tab", "click-tab-2"}
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli_main(["tasks", "miniwob"]) == 0
    lines = out.getvalue().splitlines()
    assert len(lines) == len(shipped) and "miniwob/click-test  max_steps=5" in lines
    sampler = TaskSampler(resolve("miniwob-dev"), mode="sequential", cycle=False, seed=1)
    assert [i.task.short_name for i in sampler] == DEV


def test_instances_are_deterministic_from_the_seed(env):
    def snapshot(seed: int):
        obs = env.reset("miniwob/click-button", seed=seed)
        return obs.instruction, [(e.id, e.role, e.text, e.bbox) for e in obs.elements]

    first = snapshot(7)
    snapshot(3)
    env.reset("miniwob/click-tab", seed=11)  # another task in between
    assert snapshot(7) == first
    assert len({snapshot(s)[0] for s in range(6)}) > 1


def test_reward_comes_from_the_task(env):
    obs = env.reset("miniwob/click-test-2", seed=5)
    assert obs.screen_size == (160, 210) and obs.screenshot.shape == (210, 160, 3)
    target = obs.extras["fields"]["target"]
    assert obs.instruction == f"Click button {target}."
    right = next(e for e in obs.elements if e.text == target)
    wrong = next(e for e in obs.elements if e.role == "button" and e.text != target)
    r = env.step(_tap(obs, right))
    assert r.reward == 1.0 and r.terminated and r.info["raw_reward"] == 1.0
    assert r.info["end_reason"] == "success" and 0.9 < r.info["env_reward"] <= 1.0

    obs = env.reset("miniwob/click-test-2", seed=5)
    r = env.step(_tap(obs, wrong))
    assert r.reward == 0.0 and r.terminated and r.info["raw_reward"] == -1.0
    assert r.info["end_reason"] == "failure" and not r.info["success"]
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step(Action.tap(0.5, 0.5))
    env.reset("miniwob/click-test-2", seed=5)
    r = env.step(Action.back())
    assert r.info["noop"].startswith("PRESS_BACK does nothing") and not r.done


def test_time_limit_is_off_by_default_and_configurable(env):
    env.reset("miniwob/click-test", seed=0)
    limited = make("miniwob/click-test", time_limit_s=0.5, screenshot=False)
    try:
        limited.reset(seed=0)
        time.sleep(1.2)
        r = limited.step(Action.tap(0.99, 0.01))
        assert r.terminated and r.info["raw_reward"] == -1.0 and r.info["reason"] == "timed out"
    finally:
        limited.close()
    r = env.step(Action.tap(0.99, 0.01))  # same wait on the default device: still running
    assert not r.done


def test_elements_tell_targets_apart(env):
    obs = env.reset("miniwob/click-dialog", seed=0)
    close = [e for e in obs.elements if "ui-dialog-titlebar-close" in e.attrs.get("class", "")]
    assert len(close) == 1 and close[0].role == "button" and close[0].clickable
    assert env.step(_tap(obs, close[0])).info["success"]

    obs = env.reset("miniwob/click-tab", seed=0)
    tabs = [e for e in obs.elements if e.role == "tab"]  # jQuery UI's ARIA roles
    assert [t.text for t in tabs] == ["Tab #1", "Tab #2", "Tab #3"]
    assert all(t.clickable for t in tabs)

    obs = env.reset("miniwob/enter-text", seed=0)
    box = next(e for e in obs.elements if e.editable)
    button = next(e for e in obs.elements if e.role == "button")
    assert box.role == "textbox" and button.text == "Submit" and not button.editable
    env.step(_tap(obs, box))
    r = env.step(Action.type_text(obs.extras["fields"]["target"]))
    assert (
        next(e for e in r.observation.elements if e.editable).value
        == obs.extras["fields"]["target"]
    )
    assert env.step(_tap(r.observation, button)).info["success"]


@pytest.mark.parametrize("task", ["enter-text", "click-tab"])
def test_an_episode_starts_as_on_a_fresh_page(env, task):
    """A page serves many episodes; nothing the last one did (focus, hover) may show in the
    next one's observation (a policy learned to read a Submit button still focused from the
    previous episode as a cue)."""

    def first(device, seed: int):
        obs = device.reset(f"miniwob/{task}", seed=seed)
        return [vars(e) for e in obs.elements]

    fresh = make("miniwob", screenshot=False)
    try:
        expected = first(fresh, 5)
    finally:
        fresh.close()
    for element in range(2):  # tap the first two elements: focus (textbox, Submit), hover (tab)
        obs = env.reset(f"miniwob/{task}", seed=element)
        env.step(_tap(obs, obs.elements[element]))
        assert first(env, 5) == expected


def test_a_step_is_observed_once_its_animation_has_ended(env):
    """Opening click-collapsible's section slides it open over ~400 ms; observed at once, the
    boxes below it are still moving (the agent would tap where Submit was), and typing
    meanwhile looked like a step that changed the page. A step waits until the page settles."""
    obs = env.reset("miniwob/click-collapsible", seed=0)
    header = next(e for e in obs.elements if e.role == "tab")
    r = env.step(_tap(obs, header))
    time.sleep(1.0)
    later = env.step(Action.invalid("look", "observe again, acting on nothing"))
    settled = [vars(e) for e in later.observation.elements]
    assert [vars(e) for e in r.observation.elements] == settled
    with pytest.raises(ConfigError, match="settle_ms"):
        make("miniwob", settle_ms=-1)


def test_typing_with_no_text_field_focused_does_nothing_as_on_a_phone(env):
    """click-dialog focuses the dialog's close button. On a desktop a typed space clicks it
    (a policy solved the task by typing 'clicking the "x'); a phone shows no keyboard unless a
    text field is focused, so with phone controls (the default) the step does nothing."""
    obs = env.reset("miniwob/click-dialog", seed=0)
    assert any(e.focused and e.role == "button" for e in obs.elements)
    r = env.step(Action.type_text("clicking the x"))
    assert "no text field is focused" in r.info["noop"] and not r.done
    assert r.observation.same_screen(obs)
    desktop = make("miniwob", screenshot=False, phone_controls=False)
    try:
        desktop.reset("miniwob/click-dialog", seed=0)
        assert desktop.step(Action.type_text("clicking the x")).info["success"]
    finally:
        desktop.close()
    obs = env.reset("miniwob/enter-text", seed=0)  # a focused text field still takes it
    box = next(e for e in obs.elements if e.editable)
    env.step(_tap(obs, box))
    r = env.step(Action.type_text("a b"))
    assert (
        not r.info.get("noop")
        and next(e for e in r.observation.elements if e.editable).value == "a b"
    )


def test_oracle_solves_the_dev_split(env):
    for task in DEV:
        oracle = MiniWoBOracle(task)
        for seed in range(2):
            obs = env.reset(f"miniwob/{task}", seed=seed)
            for _ in range(env.task.max_steps):
                r = env.step(oracle.act(obs))
                obs = r.observation
                if r.done:
                    break
            assert r.info["success"], (task, seed)


def test_task_pages_keep_one_page_per_task_and_episodes_unchanged():
    """``task_pages``: each task keeps its page (LRU beyond the limit); episodes play the same
    as on a single page, whichever page serves them."""
    from devicerl.envs.browser.paged import PagedBrowserEnv

    with pytest.raises(ConfigError, match=r"miniwob.task_pages=-1: must be >= 0"):
        make("miniwob", task_pages=-1)
    paged, single = (
        make("miniwob", task_pages=2, screenshot=False),
        make("miniwob", screenshot=False),
    )
    try:
        assert isinstance(paged, PagedBrowserEnv)
        plan = ["click-button", "enter-text", "click-button", "click-tab", "enter-text"]
        pages = []
        for i, task in enumerate(plan):
            first = {}
            for env in (paged, single):
                obs = env.reset(f"miniwob/{task}", seed=i)
                first[env] = (obs.instruction, [(e.role, e.text, e.bbox) for e in obs.elements])
                oracle = MiniWoBOracle(task)
                for _ in range(env.task.max_steps):
                    r = env.step(oracle.act(obs))
                    obs = r.observation
                    if r.done:
                        break
                assert r.info["success"], (task, i, env)
            assert first[paged] == first[single]
            pages.append(paged._current)
            recent = list(dict.fromkeys(reversed(plan[: i + 1])))[:2]
            assert list(paged._pages) == [f"miniwob/{t}" for t in recent[::-1]]  # LRU first
        assert pages[0] is pages[2]  # click-button came back to its page
        assert pages[1] is not pages[4]  # enter-text's page was closed (LRU) and reopened
        assert pages[1]._closed
    finally:
        paged.close()
        single.close()


def test_a_left_task_page_serves_the_next_task_by_navigation():
    """``leave``: the page of a task the device will not play again is reused for the next new
    task (no new context), and the episode plays as on a fresh page."""
    paged = make("miniwob", task_pages=4, screenshot=False)
    try:
        paged.reset("miniwob/click-button", seed=1)
        first = paged._current
        paged.leave("miniwob/click-test")  # a task with no page: nothing changes
        paged.leave("miniwob/click-button")
        assert list(paged._pages) == ["miniwob/click-button"] and not first._closed
        shown = paged.reset("miniwob/enter-text", seed=2)
        assert paged._current is first and list(paged._pages) == ["miniwob/enter-text"]
        assert first._loaded_url is not None and "enter-text" in first._loaded_url
        with make("miniwob", screenshot=False) as fresh:
            expected = fresh.reset("miniwob/enter-text", seed=2)
        assert (shown.instruction, [(e.role, e.text, e.bbox) for e in shown.elements]) == (
            expected.instruction,
            [(e.role, e.text, e.bbox) for e in expected.elements],
        )
        oracle = MiniWoBOracle("enter-text")
        for _ in range(paged.task.max_steps):
            r = paged.step(oracle.act(shown))
            shown = r.observation
            if r.done:
                break
        assert r.info["success"]
        paged.reset("miniwob/click-tab", seed=3)  # no spare left: a page of its own
        assert paged._current is not first and len(paged._pages) == 2
    finally:
        paged.close()


def test_left_pages_stay_loaded_until_a_new_task_needs_one():
    """A device kept between runs keeps every task's page: leaving does not close pages, a
    task met again finds its own page, and a new task takes the oldest left one."""
    paged = make("miniwob", task_pages=4, screenshot=False)
    try:
        paged.reset("miniwob/click-test", seed=1)
        a = paged._current
        paged.reset("miniwob/click-button", seed=1)
        b = paged._current
        paged.leave("miniwob/click-test")
        paged.leave("miniwob/click-button")
        assert not a._closed and not b._closed
        paged.reset("miniwob/click-test", seed=2)
        assert paged._current is a  # its own page, still loaded
        paged.reset("miniwob/enter-text", seed=2)
        assert paged._current is b and not a._closed  # the left page serves the new task
        assert list(paged._pages) == ["miniwob/click-test", "miniwob/enter-text"]
    finally:
        paged.close()


def test_other_task_kinds_reset_and_step(env):
    obs = env.reset("miniwob/flight.AA", seed=1)
    assert obs.screen_size == (375, 667) and obs.screenshot.shape == (667, 375, 3)
    assert obs.extras["fields"]["Departure City"] and len(obs.elements) > 10
    for task in ("book-flight", "drag-box", "use-colorwheel", "simon-says"):
        obs = env.reset(f"miniwob/{task}", seed=2)
        assert obs.instruction and obs.elements, task
        r = env.step(Action.swipe(0.3, 0.5, 0.7, 0.6))
        assert r.observation.screen_size == (160, 210)


def test_server_started_and_stopped_with_devices():
    refs = mw._Server.refs
    dev = make("miniwob/focus-text", screenshot=False)
    dev.reset(seed=0)
    assert mw._Server.httpd is not None and mw._Server.refs == refs + 1
    dev.close()
    assert mw._Server.refs == refs and (mw._Server.httpd is not None) == (refs > 0)
    with pytest.raises(ConfigError, match="serve"):
        make("miniwob/focus-text", serve="ftp")


def test_file_urls_work_without_a_server():
    dev = make("miniwob/focus-text", serve="file", screenshot=False)
    try:
        obs = dev.reset(seed=0)
        assert obs.extras["url"].startswith("file://")
        box = next(e for e in obs.elements if e.editable)
        assert dev.step(_tap(obs, box)).info["success"]
    finally:
        dev.close()


@pytest.mark.slow
def test_oracle_agrees_with_the_official_env(env):
    from miniwob_harness.official import run_official, run_ours

    for task in ("click-checkboxes", "login-user"):
        seeds = range(3)
        ours = run_ours(env, task, seeds, mw.step_budget(task))
        official = run_official(task, seeds, mw.step_budget(task))
        assert [r.success for r in ours] == [True] * 3, task
        assert [r.success for r in official] == [r.success for r in ours], task


@pytest.mark.slow
def test_every_task_resets_and_steps():
    dev = make("miniwob", screenshot=False)
    failures = []
    try:
        for task in resolve("miniwob"):
            try:
                obs = dev.reset(task, seed=0)
                r = dev.step(Action.tap(0.5, 0.6))
                if not obs.instruction or r.observation.screen_size != obs.screen_size:
                    failures.append((task.name, "no instruction"))
            except Exception as e:  # collect them all, report at once
                failures.append((task.name, repr(e)))
    finally:
        dev.close()
    assert failures == []


def test_gymnasium_view_of_a_miniwob_device():
    from gymnasium.utils.env_checker import check_env

    from devicerl.tasks.gym_adapter import GymDeviceEnv

    device = make("miniwob/click-test", screenshot=True)
    try:
        assert device.screen_size == (160, 210)  # known before the first reset
        gym_env = GymDeviceEnv(device, resolve("miniwob/click-test"))
        check_env(gym_env, skip_render_check=True)
        obs, _ = gym_env.reset(seed=3)
        assert obs["screenshot"].shape == (210, 160, 3) and obs["instruction"]
    finally:
        device.close()
