"""BrowserGym tasks as devices: our actions as BrowserGym action strings, and real BrowserGym
(in its own environment: it pins playwright 1.44) running MiniWoB++ offline and an open-ended
task on a loopback page, in the pool, on the system Chromium."""

from __future__ import annotations

import ast
import functools
import json
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pool_helpers import children_now, wait_clean

from devicerl.actions import Action
from devicerl.envs import EnvSpec, make
from devicerl.envs.browsergym.actions import Unmappable, chosen_element, to_browsergym
from devicerl.envs.browsergym.env import REQUIREMENTS
from devicerl.envs.foreign.venv import ensure_env
from devicerl.errors import ConfigError, TaskError
from devicerl.pool import EnvPool, SupervisorConfig
from devicerl.records import EndReason, Observation, UIElement
from devicerl.tasks import Task, TaskSampler, resolve
from devicerl.tasks.browsergym import agentlab_seeds, html_digest, html_hashes

pytestmark = pytest.mark.browser

#: MiniWoB's action set through AgentLab (``miniwob_all``) and the open-ended default.
MINIWOB_ALL = {"mouse_move", "mouse_click", "mouse_dblclick", "mouse_down", "mouse_up",
               "scroll", "click", "keyboard_press", "keyboard_type", "fill", "noop"}  # fmt: skip
OPEN = MINIWOB_ALL | {"go_back", "goto", "send_msg_to_user", "report_infeasible", "press"}
SCREEN = Observation(
    "x",
    (400, 200),
    elements=[
        UIElement("7", "generic", bbox=(0, 0, 400, 200)),
        UIElement("12", "button", "OK", bbox=(100, 50, 140, 70), clickable=True),
        UIElement("13", "textbox", bbox=(10, 10, 90, 30), focused=True, editable=True),
    ],
)


def call(code: str) -> tuple[str, list]:
    """A one-call action string as (function, literal arguments), read as Python."""
    node = ast.parse(code, mode="eval").body
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name), code
    return node.func.id, [ast.literal_eval(a) for a in node.args]


# -- the mapping table ------------------------------------------------------------------------
def test_a_tap_on_an_elements_centre_clicks_that_element_any_other_tap_clicks_the_point():
    assert call(to_browsergym(Action.tap(0.3, 0.3), SCREEN, MINIWOB_ALL)) == ("click", ["12"])
    assert chosen_element(SCREEN, 0.5, 0.5).id == "7"  # the page's centre is a div's
    assert call(to_browsergym(Action.tap(0.28, 0.3), SCREEN, MINIWOB_ALL)) == (
        "mouse_click", [112.0, 60.0]  # screenshot pixels
    )  # fmt: skip


def test_a_swipe_is_a_drag_in_one_step_within_the_action_set():
    swipe = Action.swipe(0.1, 0.1, 0.6, 0.9)
    assert to_browsergym(swipe, SCREEN, MINIWOB_ALL).splitlines() == [
        "mouse_down(40.0, 20.0)", "mouse_move(240.0, 180.0)", "mouse_up(240.0, 180.0)",
    ]  # fmt: skip
    with_drag = MINIWOB_ALL | {"mouse_drag_and_drop"}
    assert call(to_browsergym(swipe, SCREEN, with_drag))[0] == "mouse_drag_and_drop"


def test_typed_text_survives_quotes_and_newlines():
    text = 'it\'s "quoted"\nand ünïcode'
    assert call(to_browsergym(Action.type_text(text), SCREEN, MINIWOB_ALL)) == (
        "keyboard_type", [text]
    )  # fmt: skip
    no_keyboard = {"fill", "click"}  # then into the focused field
    assert call(to_browsergym(Action.type_text(text), SCREEN, no_keyboard)) == (
        "fill", ["13", text]
    )  # fmt: skip


def test_keys_navigation_and_the_end_of_an_episode():
    assert call(to_browsergym(Action.enter(), SCREEN, MINIWOB_ALL)) == ("keyboard_press", ["Enter"])
    assert to_browsergym(Action.back(), SCREEN, OPEN) == "go_back()"
    home = to_browsergym(Action.home(), SCREEN, OPEN, "http://127.0.0.1:9/a")
    assert call(home) == ("goto", ["http://127.0.0.1:9/a"])
    assert call(to_browsergym(Action.complete(), SCREEN, OPEN)) == ("send_msg_to_user", [""])
    said = to_browsergym(Action.complete(), SCREEN, OPEN, answer="42")  # an answer was given
    assert call(said) == ("send_msg_to_user", ["42"])
    assert to_browsergym(Action.complete(), SCREEN, MINIWOB_ALL) == "noop(0)"
    assert call(to_browsergym(Action.impossible(), SCREEN, OPEN))[0] == "report_infeasible"
    assert to_browsergym(Action.invalid("??", "unparsable"), SCREEN, OPEN) == "noop(0)"


def test_wait_long_press_and_answer_and_no_app_to_open():
    assert call(to_browsergym(Action.wait(0.25), SCREEN, {"noop"})) == ("noop", [250])
    held = to_browsergym(Action.long_press(0.3, 0.3, 1.5), SCREEN, MINIWOB_ALL).splitlines()
    assert [call(c) for c in held] == [
        ("mouse_down", [120.0, 60.0]), ("noop", [1500]), ("mouse_up", [120.0, 60.0]),
    ]  # fmt: skip
    said = to_browsergym(Action.answer('it\'s "42"'), SCREEN, OPEN)
    assert call(said) == ("send_msg_to_user", ['it\'s "42"'])


def test_what_the_benchmarks_action_set_lacks_is_unmappable():
    with pytest.raises(Unmappable, match="no go_back"):
        to_browsergym(Action.back(), SCREEN, MINIWOB_ALL)
    with pytest.raises(Unmappable, match="cannot click a point"):
        to_browsergym(Action.tap(0.9, 0.9), SCREEN, {"click"})
    with pytest.raises(Unmappable, match="no chat"):
        to_browsergym(Action.answer("42"), SCREEN, MINIWOB_ALL)
    with pytest.raises(Unmappable, match="cannot hold the pointer"):
        to_browsergym(Action.long_press(0.3, 0.3), SCREEN, {"click", "noop"})
    with pytest.raises(Unmappable, match="no apps to open"):
        to_browsergym(Action.open_app("Settings"), SCREEN, OPEN)


# -- the suite ----------------------------------------------------------------------------------
def test_agentlab_miniwob_protocol_tasks_split_and_seeds():
    assert len(resolve("agentlab-miniwob")) == 125
    train, test = resolve("agentlab-miniwob-train"), resolve("agentlab-miniwob-test")
    assert (len(train), len(test)) == (62, 63) and not {t.name for t in train} & {
        t.name for t in test
    }
    assert {t.max_steps for t in train + test} == {10}
    seeds = agentlab_seeds()
    # RandomState(42).randint(0, 2 ^ 32, 5) per task in the metadata's order; 2 ^ 32 is 34
    assert seeds["browsergym/miniwob.ascending-numbers"] == [28, 14, 7, 20, 18]
    assert seeds["browsergym/miniwob.bisect-angle"] == [22, 10, 10, 23, 23]
    assert len(seeds) == 125 and max(max(s) for s in seeds.values()) < 34


def test_the_miniwob_pages_are_hashed():
    hashes = html_hashes()
    assert "miniwob/click-test.html" in hashes and "core/core.js" in hashes
    assert len(html_digest(hashes)) == 64 and html_digest(hashes) == html_digest(dict(hashes))


# -- real BrowserGym ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def python() -> str:
    return str(ensure_env(REQUIREMENTS))


PAGE = b"""<!doctype html><html><body>
<input id="name" aria-label="Name" style="position:absolute;left:20px;top:20px;width:200px">
<button id="go" style="position:absolute;left:20px;top:80px;width:120px;height:40px"
 onclick="this.textContent = 'Hello ' + document.getElementById('name').value">Greet</button>
<button id="hold" style="position:absolute;left:20px;top:140px;width:120px;height:40px"
 onmousedown="this.dataset.down = Date.now()"
 onmouseup="this.textContent = Date.now() - this.dataset.down >= 500 ? 'Held' : 'Tapped'"
 >Hold</button>
</body></html>"""


@pytest.fixture
def page_url():
    class Handler(SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(PAGE)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/greet.html"
    server.shutdown()
    server.server_close()


def at(obs: Observation, role: str, text: str | None = None) -> tuple[float, float]:
    """The normalised centre of the first element with ``role`` (and ``text``)."""
    element = next(e for e in obs.elements if e.role == role and text in (None, e.text))
    return obs.to_normalised(*element.center)


def tap(obs: Observation, role: str, text: str | None = None) -> Action:
    return Action.tap(*at(obs, role, text))


def test_miniwob_and_an_open_ended_page_run_in_the_pool(python, page_url) -> None:
    openended = Task(
        "browsergym/openended",
        max_steps=8,
        env="browsergym",
        params={"task_kwargs": {"start_url": page_url, "goal": "Greet Ada"}},
    )
    tasks = [*resolve("browsergym/miniwob.click-test"), openended]
    baseline = children_now()
    plan = {
        "Click the button.": [lambda o: tap(o, "button")],
        "Greet Ada": [
            lambda o: tap(o, "textbox"),
            lambda o: Action.type_text("Ada"),
            lambda o: tap(o, "button", "Greet"),
            lambda o: Action.long_press(*at(o, "button", "Hold"), 1.0),  # held: "Held"
            lambda o: Action.wait(0.2),
            lambda o: Action.answer("Greeted Ada"),
            lambda o: Action.complete(),  # repeats the answer, the chat's last message
        ],
    }
    pool = EnvPool(
        EnvSpec("browsergym", {"python": python}),
        tasks=TaskSampler(tasks, mode="sequential", cycle=False),
        supervision=SupervisorConfig(step_timeout=60, reset_timeout=120),
    )
    done, tag = [], pool.backend.tag
    try:
        while len(done) < 2:
            ready = pool.recv(min_ready=1, timeout=120)
            assert ready, pool.stats()
            done += [r.trajectory for r in ready if r.trajectory is not None]
            for r in ready:
                if r.observation is not None:
                    todo = plan[r.observation.instruction].pop(0)
                    pool.send([todo(r.observation)], [r.env_id])
    finally:
        pool.close()
    tagged, children = wait_clean(tag, baseline)  # no BrowserGym, driver or Chromium left
    assert not tagged and not children, (tagged, children)
    miniwob, greet = done
    assert miniwob.task == "browsergym/miniwob.click-test" and miniwob.success
    assert miniwob.end_reason is EndReason.SUCCESS and miniwob.steps[0].reward == 1.0
    step = miniwob.steps[0]
    assert step.info["browsergym_action"].startswith("click(")  # the element, by its bid
    assert step.info["task_info"]["RAW_REWARD_GLOBAL"] == 1
    assert step.observation.screenshot.shape == (321, 498, 3)  # BrowserGym's 1.5 zoom
    assert greet.end_reason is EndReason.AGENT_ENDED and not greet.success
    assert [s.info["browsergym_action"].split("(")[0] for s in greet.steps] == [
        "click", "keyboard_type", "click", "mouse_down", "noop", "send_msg_to_user",
        "send_msg_to_user",
    ]  # fmt: skip
    assert greet.steps[-1].info["browsergym_action"] == "send_msg_to_user('Greeted Ada')"
    down, hold, up = greet.steps[3].info["browsergym_action"].splitlines()
    assert hold == "noop(1000)" and up == down.replace("mouse_down", "mouse_up")
    assert all(s.info["last_action_error"] == "" for s in greet.steps), greet.steps
    assert greet.answer == "Greeted Ada"
    final = greet.final_observation
    assert final is not None and final.extras["url"] == page_url
    assert any(e.role == "button" and e.text == "Hello Ada" for e in final.elements)
    assert any(e.role == "button" and e.text == "Held" for e in final.elements)
    assert any(e.role == "textbox" and e.value == "Ada" for e in final.elements)


def test_a_benchmark_without_its_servers_is_refused_in_one_line(python, monkeypatch) -> None:
    for name in ("WA_SHOPPING", "WA_MAP"):
        monkeypatch.delenv(name, raising=False)
    env = make("browsergym", python=python)
    try:
        with pytest.raises(ConfigError, match=r"webarena\.3 needs WA_SHOPPING, .*WA_MAP") as e:
            env.reset("browsergym/webarena.3", seed=0)
        assert "\n" not in str(e.value)
        with pytest.raises(TaskError, match=r"needs params task_kwargs\.start_url"):
            env.reset("browsergym/openended", seed=0)
        for name in (
            "SHOPPING",
            "SHOPPING_ADMIN",
            "REDDIT",
            "GITLAB",
            "WIKIPEDIA",
            "MAP",
            "HOMEPAGE",
        ):
            monkeypatch.setenv(f"WA_{name}", "http://127.0.0.1:9")
        with pytest.raises(ConfigError, match=r"webarena\.3 needs its package .*webarena"):
            env.reset("browsergym/webarena.3", seed=0)  # not installed over there
    finally:
        env.close()


def test_without_its_environment_the_device_says_how_to_make_it(tmp_path, monkeypatch):
    monkeypatch.setenv("DEVICERL_ENV_CACHE", str(tmp_path))
    with pytest.raises(ConfigError, match="`devicerl env browsergym`"):
        make("browsergym/miniwob.click-test")


# -- the command line and the benchmark's parts -------------------------------------------------
def test_devicerl_tasks_says_what_browsergym_needs_and_env_prints_the_interpreter(
    python, capsys, monkeypatch
) -> None:
    from _holes import cli

    monkeypatch.delenv("WA_MAP", raising=False)
    r = cli(capsys, "tasks")
    assert r.code == 0 and "  browsergym - needs:" in r.out
    assert f"BrowserGym's own environment: {python}" in r.out
    assert "miniwob (125 tasks, 10 steps): package browsergym-miniwob" in r.out
    webarena = next(line for line in r.out.splitlines() if "webarena (812 tasks" in line)
    assert "missing" in webarena and "WA_MAP" in webarena
    r = cli(capsys, "env", "browsergym")
    assert r.code == 0 and r.out.strip() == python and "browsergym-core==0.14.3" in r.err
    assert cli(capsys, "env", "nope").one_line().startswith("devicerl env: error: argument name")


def test_the_benchmark_evaluates_agentlabs_instances_and_scores_unreached_tasks_zero(
    monkeypatch,
) -> None:
    import agentlab_miniwob as am  # benchmarks/ (see conftest.py)
    import miniwob_suite

    from devicerl.agents.capabilities import ActionKind

    names = ["browsergym/miniwob.click-test", "browsergym/miniwob.choose-list"]
    instances = am._instances(names, 10)
    assert [(i.task.name, i.seed) for i in instances[:5]] == [
        (names[0], s) for s in agentlab_seeds()[names[0]]
    ]
    assert len(instances) == 10 and {i.task.max_steps for i in instances} == {10}
    sampler = am.FixedInstances(instances)
    assert [sampler.next() for _ in range(11)][-1] is None

    # every kind of action (the real `_agent_kinds` reads the configured agent's heads)
    monkeypatch.setattr(miniwob_suite, "_agent_kinds", lambda cfg: set(ActionKind))
    ok, why = am.reachable(names, None)
    assert ok == names[:1] and "<select>" in why[names[1]]
    # an evaluation's key reads back from its eval.json as it was made (so a rerun reuses it)
    key = am.eval_key("small", None, names)
    assert json.loads(json.dumps(key)) == key and isinstance(key["code"], list)
    scored = am.score({"per_task": {names[0]: {"successes": 4, "episodes": 5}}}, names)
    assert scored["mean"] == 0.4 and scored["episodes"] == 10
    assert scored["per_task"][names[1]] == {"successes": 0, "episodes": 0}
