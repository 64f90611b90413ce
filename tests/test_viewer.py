"""`devicerl view` on a real short run, rendered in real headless Chromium."""

import shutil
from collections import Counter

import pytest
from _runs import devicerl_cli as devicerl
from _runs import swipe_episode, truncated_at_reset

from devicerl.runtime.runs.folder import RunDir

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A real run: the demo collects with synthetic devices; two hand-made episodes (a swipe
    judged by a VLM verdict, a crash at reset) join it through the run's writer."""
    path = tmp_path_factory.mktemp("run") / "demo"
    r = devicerl("demo", "--synthetic", "--episodes", "10", "--devices", "2", "--out", str(path))
    assert r.returncode == 0, r.stderr
    with RunDir(path).writer() as w:
        w.extend([swipe_episode(), truncated_at_reset()])
    return RunDir(path)


@pytest.fixture(scope="module")
def page():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_FLAGS)
        yield browser.new_page(viewport={"width": 1200, "height": 900})
        browser.close()


def _visible(page) -> int:
    return page.locator(".episode:visible").count()


@pytest.mark.browser
def test_report_renders_all_episodes_and_filters(run, page) -> None:
    r = devicerl("view", str(run.path))
    assert r.returncode == 0, r.stderr
    trajs = run.store().read_all()
    assert len(trajs) == 12 and "12 of 12 episodes" in r.stdout
    page.goto(run.report.joinpath("index.html").as_uri())
    assert page.locator(".episode").count() == _visible(page) == 12
    assert page.locator("#shown").inner_text() == "12"

    tasks = Counter(t.task for t in trajs)
    page.select_option("#task", "synthetic/tap")
    assert _visible(page) == tasks["synthetic/tap"] and tasks["synthetic/tap"] > 1
    assert page.locator("#shown").inner_text() == str(tasks["synthetic/tap"])
    page.select_option("#outcome", "truncated")
    assert _visible(page) == 1
    page.select_option("#task", "")
    page.select_option("#outcome", "success")
    assert _visible(page) == sum(t.success for t in trajs)
    page.select_option("#outcome", "")

    taps = sum(s.action.is_tap for t in trajs for s in t.steps)
    assert page.locator("svg.marks circle.tap").count() == taps > 0
    assert page.locator("svg.marks line.swipe").count() == 1
    # the hand-made episode whose first step has a verdict (shards of one second read in any order)
    judged = next(t for t in trajs if t.steps and t.steps[0].verdict)
    swipe = page.locator(f'.episode[data-episode="{judged.episode_id}"]')
    assert "swiped <b>away</b>" in swipe.locator(".verdict").inner_text()  # escaped, not HTML
    assert swipe.locator(".verdict b").all_inner_texts() == ["judge", "success", "reason"]

    natural = "el => el.naturalWidth"
    curves = page.locator("#curves img")
    assert curves.count() >= 2 and all(
        w > 0 for w in curves.evaluate_all(f"els => els.map({natural})")
    )
    assert page.locator(".shot img").first.evaluate(natural) > 0  # in view, so loaded
    for src in page.locator(".shot img").evaluate_all("els => els.map(e => e.getAttribute('src'))"):
        assert (run.report / src).is_file()


@pytest.mark.browser
def test_report_limits_episodes(run, page, tmp_path) -> None:
    out = tmp_path / "report"
    r = devicerl(
        "view", str(run.path), "--out", str(out), "--set", "max_episodes=3", "curves=false"
    )
    assert r.returncode == 0, r.stderr
    page.goto((out / "index.html").as_uri())
    newest = [t.episode_id for t in run.store().read_all(screenshots=False)][-3:]
    shown = page.locator(".episode").evaluate_all("els => els.map(e => e.dataset.episode)")
    assert shown == newest[::-1] and page.locator("#curves").count() == 0


@pytest.mark.browser
def test_episodes_come_first_and_curves_are_one_click_away(run, page, tmp_path) -> None:
    out = tmp_path / "report"
    r = devicerl("view", str(run.path), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "view: 12/12 episodes" in r.stderr  # progress while rendering
    page.goto((out / "index.html").as_uri())
    first = page.locator(".episode").first.bounding_box()
    assert first is not None and first["y"] < 400  # on the first screen, not below the curves
    assert page.locator("#curves").is_hidden()
    page.click("#tab-curves")
    assert page.locator("#curves").is_visible() and page.locator("#episodes").is_hidden()
    page.click("#tab-episodes")
    assert page.locator("#episodes").is_visible() and page.locator("#curves").is_hidden()


def _nonblank(png: bytes) -> bool:
    import io

    import numpy as np
    from PIL import Image

    px = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=np.float64)
    return px.std() > 8 and len(np.unique(px)) > 4  # boxes and text, not one flat colour


@pytest.mark.browser
def test_every_step_shows_a_screen_also_without_screenshots(page, tmp_path) -> None:
    """A DOM-only run (as the demo's: no screenshot stored) gets a wireframe per step from its
    UI elements, with the tap drawn on it; a run with screenshots shows them."""
    from devicerl.agents import RandomPolicy
    from devicerl.envs import make
    from devicerl.runtime.acting.rollout import rollout

    run = RunDir(tmp_path / "run").create()
    trajs = []
    for render in (False, True):
        env = make("synthetic", screen=(96, 160), seed=3, render=render, n_boxes=4)
        trajs += [rollout(env, RandomPolicy(seed=i), "synthetic/tap", seed=i) for i in range(3)]
        env.close()
    trajs.append(truncated_at_reset())  # no observation at all: still a screen, saying so
    with run.writer() as w:
        w.extend(trajs)
    r = devicerl("view", str(run.path), "curves=false")
    assert r.returncode == 0, r.stderr
    page.goto(run.report.joinpath("index.html").as_uri())
    shots = page.locator(".step .shot")
    expected = sum(t.length + (t.final_observation is not None or not t.steps) for t in trajs)
    assert shots.count() == expected
    wired = page.locator(".step .shot.wired")
    without = sum(
        t.length + 1 for t in trajs if all(s.observation.screenshot is None for s in t.steps)
    )
    assert wired.count() == without and wired.locator("rect.el").count() > 0
    assert page.locator(".step .shot img").count() == expected - without
    taps = sum(s.action.is_tap for t in trajs for s in t.steps)
    assert page.locator(".step svg.marks circle.tap").count() == taps
    for i in range(shots.count()):
        shot = shots.nth(i)
        shot.scroll_into_view_if_needed()
        if shot.locator("img").count():
            shot.locator("img").evaluate("img => img.decode()")
            assert shot.locator("img").evaluate("img => img.naturalWidth") > 0
        assert _nonblank(shot.screenshot()), f"step screen {i} is blank"
