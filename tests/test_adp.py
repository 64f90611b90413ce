"""Agent Data Protocol export and import: round trips over runs of every device kind here (the
synthetic device, real headless Chromium, Android through the fake adb server; BrowserGym in
test_adp_browsergym.py), the action vocabularies in both directions, and hand-made files in the
shapes of ADP's AndroidControl and Mind2Web samples (neulab/agent-data-protocol 09e778b,
datasets/*/sample_std.json)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from adp_helpers import Script, round_trip, same
from android_helpers import device, env_kwargs
from PIL import Image

from devicerl.actions import Action, ActionType
from devicerl.cli.main import main
from devicerl.data.adp import import_adp
from devicerl.data.adp.vocab import Screen, from_call, to_call
from devicerl.data.adp.write import export_adp
from devicerl.data.store import TrajectoryStore
from devicerl.envs import make
from devicerl.records import Judgement, UIElement
from devicerl.runtime.acting.rollout import rollout
from devicerl.tasks import Task
from devicerl.testing.fake_adb import FakeAdbServer

EVERY = [
    Action.tap(0.25, 0.5),
    Action.swipe(0.5, 0.8, 0.5, 0.2),
    Action.type_text('héllo "quoted"\n\tand a ✓'),
    Action.back(),
    Action.home(),
    Action.enter(),
    Action.invalid('{"type": "FLY"', "unknown action type 'FLY'"),
    Action.tap(0.3, 0.7),  # 0.7 * 96 / 96 is not 0.7: the exact value goes in the details
    Action.long_press(0.5, 0.25),
    Action.long_press(0.75, 0.125, duration_s=2.5),
    Action.open_app("Zoho Meeting"),
    Action.wait(),
    Action.wait(0.25),
    Action.answer("It is 21 °C in Paris"),
    Action.impossible(),
]


def _play(env, task, actions, seed=0):
    t = rollout(env, Script(actions), task, seed)
    assert t.steps, t
    return t


# -- round trips over real devices -------------------------------------------------------------
def test_synthetic_runs_round_trip_exactly(tmp_path) -> None:
    env = make("synthetic", screen=(64, 96), n_boxes=3, strict=False, max_len=12)
    task = Task("synthetic/tap", max_steps=len(EVERY) + 1, env="synthetic")
    played = _play(env, task, EVERY)
    assert [s.action for s in played.steps] == EVERY
    blind = make("synthetic", screen=(64, 96), n_boxes=3, render=False)  # no screenshots
    dark = _play(blind, "synthetic/type", [Action.tap(0.1, 0.1), Action.type_text("x")], seed=4)
    env.close(), blind.close()
    # what a judge and a human add; an element with fields no annotation carries and a box
    # whose right edge x + width does not give back bit for bit
    played.judgement = Judgement(
        {"label": "success", "reason": "looks done", "judge": "vlm"}, False
    )
    played.ground_truth = True
    played.steps[1].verdict = {"label": "failure", "step": 1}
    el = UIElement("e7", "input", "Name", "Ada", (0.1, 0.2, 0.3, 0.7), True, True, True,
                   {"content_desc": "name field", "depth": 3, "note": [1, 2]})  # fmt: skip
    played.steps[2].observation.elements.append(el)
    back, lines = round_trip([played, dark], tmp_path)
    for a, b in zip([played, dark], back):
        same(a, b)
    line = lines[0]
    assert line["schema_version"] == "1.2.0" and line["id"] == played.episode_id
    assert line["content"][0] == {
        "class_": "text_observation", "content": played.instruction, "source": "user"
    }  # fmt: skip
    actions = [c for c in line["content"] if c["class_"] == "api_action"]
    assert [a["function"] for a in actions] == [
        "click", "swipe", "input_text", "navigate_back", "navigate_home", "keyboard_enter",
        "invalid", "click", "long_press", "long_press", "open_app", "wait", "wait", "answer",
        "status",
    ]  # fmt: skip
    assert [a["kwargs"] for a in actions[8:14]] == [
        {"x": 32.0, "y": 24.0}, {"x": 48.0, "y": 12.0, "duration_s": 2.5},
        {"app_name": "Zoho Meeting"}, {}, {"seconds": 0.25}, {"text": "It is 21 °C in Paris"},
    ]  # fmt: skip
    assert actions[0]["kwargs"] == {"x": 16.0, "y": 48.0}  # pixels of the 64x96 screenshot
    assert actions[-1]["kwargs"] == {"goal_status": "infeasible"}
    assert actions[0]["reasoning_content"] == played.steps[0].text
    assert [a["reward"] for a in actions] == [s.reward for s in played.steps]
    image = line["content"][1]
    assert image["class_"] == "image_observation" and image["content"].startswith("images/")
    assert (tmp_path / "adp" / image["content"]).is_file()
    ann = image["annotations"][0]
    box = played.steps[0].observation.elements[0].bbox
    assert ann["bounding_box"] == {
        "x": box[0], "y": box[1], "width": box[2] - box[0], "height": box[3] - box[1]
    }  # fmt: skip
    details = line["details"]
    assert details["task"] == "synthetic/tap" and details["seed"] == "0"
    assert details["success"] == str(played.success).lower()
    assert (
        details["end_reason"] == played.end_reason.value and details["judge_verdict"] == "success"
    )
    ours = json.loads(details["devicerl"])
    assert ours["steps"][0]["log_prob"] == -0.25 and ours["steps"][0]["policy_version"] == 3
    assert "action" in ours["steps"][7]  # the inexact tap keeps its exact coordinates
    assert "fixes" in ours["steps"][2]["screen"]
    # a DOM-only screen of a phone-like device: no image, its elements whole in the details
    dark_line = lines[1]
    assert not any(c["class_"].endswith("observation") and c["class_"] != "text_observation"
                   for c in dark_line["content"])  # fmt: skip
    assert json.loads(dark_line["details"]["devicerl"])["steps"][0]["screen"]["elements"]


@pytest.mark.browser
@pytest.mark.parametrize("screenshot", [True, False], ids=["pixels", "dom-only"])
def test_browser_runs_round_trip_exactly(tmp_path, screenshot) -> None:
    env = make("browser", screenshot=screenshot, task_pages=1)
    try:
        obs = env.reset("miniwob/click-button", seed=3)
        target = next(e for e in obs.elements if e.role == "button")
        tap = Action.tap(*obs.to_normalised(*target.center))
        played = _play(env, "miniwob/click-button",
                       [Action.swipe(0.5, 0.6, 0.5, 0.4), Action.enter(), tap], seed=3)  # fmt: skip
    finally:
        env.close()
    (back,), (line,) = round_trip([played], tmp_path)
    same(played, back)
    screens = [c for c in line["content"] if c["class_"] == "web_observation"]
    assert screens and all(s["url"] and s["viewport_size"] for s in screens)
    assert all((s["image_observation"] is not None) == screenshot for s in screens)
    functions = [c["function"] for c in line["content"] if c["class_"] == "api_action"]
    assert functions[:3] == ["mouse_drag_and_drop", "keyboard_press", "mouse_click"]


ANDROID = [
    Action.tap(0.5, 0.55),
    Action.long_press(0.5, 0.55),
    Action.wait(0.1),
    Action.swipe(0.5, 0.9, 0.5, 0.1),
    Action.type_text("wifi"),
    Action.back(),
    Action.complete(),
]


def test_android_runs_round_trip_exactly(tmp_path) -> None:
    task = Task(
        "aitw/general/0001",
        instruction="Open the settings app",
        max_steps=len(ANDROID) + 1,
        env="android",
    )
    with FakeAdbServer([device(n_screens=4)]) as srv:
        env = make(
            "android", **env_kwargs(srv.port, lock_dir=str(tmp_path / "l"), ui_elements=True)
        )
        try:
            played = _play(env, task, ANDROID)
        finally:
            env.close()
    assert played.steps[0].observation.screenshot is not None
    assert played.steps[0].observation.elements[1].attrs["resource_id"]
    (back,), (line,) = round_trip([played], tmp_path)
    same(played, back)
    functions = [c["function"] for c in line["content"] if c["class_"] == "api_action"]
    assert functions == [
        "click", "long_press", "wait", "swipe", "input_text", "navigate_back", "status"
    ]  # fmt: skip


# -- the vocabularies --------------------------------------------------------------------------
PHONE = Screen((200, 400), [UIElement("a12", "button", "OK", bbox=(20, 40, 60, 80))])
WEB = Screen((200, 400), PHONE.elements, web=True)


@pytest.mark.parametrize("screen", [PHONE, WEB, Screen()], ids=["phone", "web", "no-size"])
@pytest.mark.parametrize("action", [*EVERY[:-1], Action.complete(), Action.impossible()])
def test_every_action_maps_to_a_call_and_back(screen, action) -> None:
    function, kwargs = to_call(action, screen)
    back = from_call(function, kwargs, screen)
    for field in ("type", "text", "raw", "reason", "app", "duration_s"):
        assert getattr(back, field) == getattr(action, field), field
    points = [p for p in (action.touch, action.lift) if p is not None]
    back_points = [p for p in (back.touch, back.lift) if p is not None]
    assert np.allclose(back_points, points, atol=1e-12)


@pytest.mark.parametrize(
    "function,kwargs,expected",
    [
        ("touch_and_lift", {"x0": 0.1, "y0": 0.2, "x1": 0.1, "y1": 0.2}, Action.tap(0.1, 0.2)),
        ("click", {"x": 100, "y": 100}, Action.tap(0.5, 0.25)),
        ("click", {"index": 0}, Action.tap(0.2, 0.15)),  # AndroidWorld: the element's centre
        ("click", {"bid": "a12"}, Action.tap(0.2, 0.15)),  # BrowserGym: the element's centre
        ("scroll", {"direction": "down"}, Action.swipe(0.5, 0.75, 0.5, 0.25)),  # finger up
        ("swipe", {"direction": "down"}, Action.swipe(0.5, 0.25, 0.5, 0.75)),  # finger down
        ("scroll", {"delta_x": 0, "delta_y": 100}, Action.swipe(0.5, 0.5, 0.5, 0.25)),
        ("type", {"text": "hi"}, Action.type_text("hi")),
        ("press", {"key_name": "go_home"}, Action.home()),
        ("keyboard_press", {"key": "Enter"}, Action.enter()),
        ("back", {}, Action.back()),
        ("end", {"succeeds": True}, Action.complete()),
        ("end", {"succeeds": False}, Action.impossible()),
        ("status", {"goal_status": "complete"}, Action.complete()),
        ("send_msg_to_user", {"text": ""}, Action.complete()),
        ("report_infeasible", {"reason": "no such flight"}, Action.impossible()),
        ("send_msg_to_user", {"text": "Paris"}, Action.answer("Paris")),
        ("answer", {"text": "42"}, Action.answer("42")),
        ("long_press", {"index": 0}, Action.long_press(0.2, 0.15)),
        ("long_press", {"x": 50, "y": 100, "duration_s": 3}, Action.long_press(0.25, 0.25, 3.0)),
        ("open_app", {"app_name": "Zoho Meeting"}, Action.open_app("Zoho Meeting")),
        ("wait", {}, Action.wait()),
        ("wait", {"seconds": 2}, Action.wait(2.0)),
    ],
)
def test_foreign_vocabularies_are_read(function, kwargs, expected) -> None:
    assert from_call(function, kwargs, PHONE) == expected


@pytest.mark.parametrize(
    "function,kwargs,why",
    [
        ("double_tap", {"x": 5, "y": 5}, "no devicerl action for ADP function"),
        ("wait", {"seconds": 60}, "seconds 60 is outside (0, 10] seconds"),
        ("open_app", {"app_name": ""}, "OPEN_APP needs a non-empty app name"),
        ("answer", {"text": "  "}, "an empty answer"),
        ("click", {"xpath": "//*[@id='x']"}, "names no point and no element"),
        ("click", {"bid": "zz"}, "'zz' is not on the screen"),
        ("click", {"x": 500, "y": 10}, "outside the 200x400 screen"),
        ("type", {"xpath": "//input", "value": "x"}, "two actions here"),
        ("fill", {"bid": "a12", "value": "x"}, "no devicerl action"),
        ("scroll", {"direction": "sideways"}, "unknown direction"),
    ],
)
def test_calls_with_no_devicerl_action_become_invalid_actions_with_their_text(
    function, kwargs, why
) -> None:
    a = from_call(function, kwargs, PHONE)
    assert a.type is ActionType.INVALID and why in a.reason
    assert a.raw.startswith(f"{function}(") and all(str(v) in a.raw for v in kwargs.values())


def test_pixel_calls_on_a_screen_of_unknown_size_are_invalid() -> None:
    a = from_call("click", {"x": 3, "y": 4}, Screen())
    assert a.is_invalid and "unknown size" in a.reason


# -- hand-made files in the shapes of ADP's samples --------------------------------------------
def _png(path: Path, size: tuple[int, int], colour: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((size[1], size[0], 3), colour, np.uint8)).save(path)


def _android_control(root: Path) -> Path:
    """An AndroidControl-shaped file (a JSON array, as sample_std.json): the goal as a
    message_action, pixel boxes, pixel clicks, AndroidControl's function names."""
    for k in range(4):
        _png(root / "0" / f"screenshot_{k}.png", (108, 240), 40 * k)
    ann = [
        {"text": "8:37", "element_type": "android.widget.TextView",
         "bounding_box": {"x": 14.0, "y": 1.0, "width": 8.0, "height": 13.0}},
        {"text": "Search", "element_type": "android.widget.Button",
         "bounding_box": {"x": 67.0, "y": 15.0, "width": 12.0, "height": 12.0},
         "content_description": "Resource ID: com.app:id/search", "clickable": True,
         "editable": False},
    ]  # fmt: skip
    shot = [{"class_": "image_observation", "content": f"0/screenshot_{k}.png",
             "annotations": ann, "source": "user"} for k in range(4)]  # fmt: skip
    record = {
        "schema_version": "1.2.0",
        "id": "0",
        "content": [
            {"class_": "message_action", "content": "Open Zoho Meet, view the meetings.",
             "description": None},
            shot[0],
            {"class_": "api_action", "function": "open_app",
             "kwargs": {"app_name": "Zoho Meeting"}, "description": "Open the Zoho Meet app"},
            shot[1],
            {"class_": "api_action", "function": "click", "kwargs": {"x": 73, "y": 21},
             "description": "tap search"},
            shot[2],
            {"class_": "api_action", "function": "scroll", "kwargs": {"direction": "down"},
             "description": "scroll down"},
            shot[3],
        ],
        "details": {},
    }  # fmt: skip
    path = root / "sample_std.json"
    path.write_text(json.dumps([record], indent=2))
    return path


def test_an_android_control_shaped_file_imports_and_round_trips(tmp_path) -> None:
    src = _android_control(tmp_path / "ac")
    stats = import_adp([src], tmp_path / "s1")
    assert stats.trajectories == 1 and stats.read.unmapped == {}
    (t,) = TrajectoryStore(tmp_path / "s1").read_all()
    assert t.instruction == "Open Zoho Meet, view the meetings." and t.task.startswith("adp/")
    assert t.steps[0].action == Action.open_app("Zoho Meeting")
    assert t.steps[1].action == Action.tap(73 / 108, 21 / 240)
    assert t.steps[2].action.swipe_direction == "up"  # the content scrolls down
    assert t.steps[1].info == {"description": "tap search"}
    obs = t.steps[1].observation
    assert obs.screen_size == (108, 240) and obs.screenshot[0, 0, 0] == 40
    search = obs.elements[1]
    assert search.role == "android.widget.Button" and search.bbox == (67.0, 15.0, 79.0, 27.0)
    assert search.clickable and search.attrs == {"content_desc": "Resource ID: com.app:id/search"}
    assert t.final_observation is not None and t.final_observation.screenshot[0, 0, 0] == 120
    assert not t.success and t.extras["adp"]["id"] == "0"
    # export -> import keeps every field ADP carries
    export_adp([t], tmp_path / "again")
    line = json.loads((tmp_path / "again" / "trajectories.jsonl").read_text())
    assert line["id"] == "0"
    import_adp([tmp_path / "again"], tmp_path / "s2")
    (t2,) = TrajectoryStore(tmp_path / "s2").read_all()
    same(t, t2)
    assert [s.info for s in t2.steps] == [s.info for s in t.steps]


def test_a_mind2web_shaped_file_imports_its_task_pages_and_unmapped_calls(tmp_path) -> None:
    html = '<html backend_node_id="1"><button backend_node_id="7">Search</button></html>'
    record = {
        "schema_version": "1.3.1",
        "id": "ce34bc61",
        "content": [
            {"class_": "text_observation", "content": "Find a mini van at Brooklyn City",
             "name": None, "source": "user"},
            {"tool_call_id": "call_1", "class_": "api_action", "function": "goto",
             "kwargs": {"url": "https://www.enterprise.com"}, "description": None},
            {"tool_call_id": "call_1", "class_": "web_observation", "html": html,
             "axtree": None, "url": None, "image_observation": None, "viewport_size": None},
            {"tool_call_id": "call_2", "class_": "api_action", "function": "click",
             "kwargs": {}, "description": None},
            {"tool_call_id": "call_2", "class_": "web_observation", "html": html,
             "axtree": None, "url": None, "image_observation": None, "viewport_size": None},
            {"tool_call_id": "call_3", "class_": "api_action", "function": "type",
             "kwargs": {"value": "Brooklyn"}, "description": None},
        ],
        "details": {"website": "enterprise", "domain": "Travel",
                    "confirmed_task": "Find a mini van at Brooklyn City"},
    }  # fmt: skip
    src = tmp_path / "m2w.jsonl"
    src.write_text(json.dumps(record) + "\n")
    stats = import_adp([src], tmp_path / "store")
    assert stats.read.unmapped == {"goto": 1, "click": 1, "type": 1}
    (t,) = TrajectoryStore(tmp_path / "store").read_all()
    assert t.instruction == "Find a mini van at Brooklyn City" and len(t.steps) == 3
    assert all(s.action.is_invalid for s in t.steps)
    assert t.steps[1].observation.extras == {"url": None, "html": html}
    assert t.extras["adp"]["details"]["website"] == "enterprise"
    export_adp([t], tmp_path / "again")
    line = json.loads((tmp_path / "again" / "trajectories.jsonl").read_text())
    assert line["details"]["website"] == "enterprise" and line["id"] == "ce34bc61"
    pages = [c for c in line["content"] if c["class_"] == "web_observation"]
    assert len(pages) == 2  # the first step saw no page: none is made up
    import_adp([tmp_path / "again"], tmp_path / "s2")
    (t2,) = TrajectoryStore(tmp_path / "s2").read_all()
    same(t, t2)


def test_import_again_adds_nothing_and_the_cli_reports_counts(tmp_path, capsys) -> None:
    src = _android_control(tmp_path / "ac")
    out = tmp_path / "imported"
    assert main(["import-adp", str(src.parent), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "imported 1 trajectories (3 steps" in said and "stored as invalid actions: 0" in said
    assert main(["import-adp", str(src), "--out", str(out)]) == 0
    assert "imported 0 trajectories" in capsys.readouterr().out
    assert len(TrajectoryStore(out / "trajectories")) == 1
    exported = tmp_path / "exported"
    assert main(["export", str(out), "--format", "adp", "--out", str(exported)]) == 0
    assert "exported 1 trajectories (3 steps, 4 images) as ADP" in capsys.readouterr().out
    assert main(["export", str(out), "--format", "adp", "--out", str(exported)]) == 2
    assert "exists" in capsys.readouterr().err


def test_the_viewer_opens_an_import_like_its_own_runs(tmp_path, capsys) -> None:
    """An import folder's report: every step with its screenshot (or, without one, a wireframe
    of its elements), its action and its text."""
    src = _android_control(tmp_path / "ac")
    blind = make("synthetic", screen=(64, 96), n_boxes=3, render=False)
    dom_only = _play(blind, "synthetic/tap", [Action.tap(0.9, 0.9)], seed=2)
    blind.close()
    export_adp([dom_only], tmp_path / "dom")
    out = tmp_path / "imported"
    assert main(["import-adp", str(src), str(tmp_path / "dom"), "--out", str(out)]) == 0
    assert main(["view", str(out)]) == 0
    assert "2 of 2 episodes" in capsys.readouterr().out
    page = (out / "report" / "index.html").read_text()
    n = dom_only.length
    assert page.count('class="step"') == 3 + n and page.count('class="step final"') == 2
    assert page.count('alt="screenshot"') == 4  # the AndroidControl screens: 3 steps, final
    assert page.count('class="wire"') == n + 1  # the screens without a screenshot
    assert "open_app(&#x27;Zoho Meeting&#x27;)" in page
    assert "Open Zoho Meet, view the meetings." in page and "thinking 1: tap(0.900" in page
    assert dom_only.steps[0].observation.elements[0].text in page
