"""AndroidWorld tasks: the suite listed from a server, episodes on our ADB device scored by the
server, in the pool, with the server going down mid-run.

Every device is a real `AndroidWorldEnv` (adbutils over TCP to `FakeAdbServer`, httpx to
`AndroidWorldStandIn`, which follows android_world's ``server/android_server.py``); no emulator
runs here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time

import httpx
import pytest
from android_helpers import device, drive, env_kwargs

from devicerl.actions import Action
from devicerl.envs import EnvSpec, make
from devicerl.envs.androidworld.client import AndroidWorldClient, Instance, SuiteParams
from devicerl.envs.registry import read_options
from devicerl.errors import ConfigError, DeviceCrashed, DeviceError, TaskError
from devicerl.judges import JudgeConfig
from devicerl.judges.native import NativeJudge
from devicerl.pool import EnvPool, SupervisorConfig
from devicerl.records import EndReason, Observation
from devicerl.runtime.acting.judging import judge_each
from devicerl.tasks import Task, TaskSampler, registry, resolve
from devicerl.tasks.androidworld import DEFAULT_BUDGET, androidworld_tasks
from devicerl.testing.androidworld_server import APPS, AndroidWorldStandIn
from devicerl.testing.fake_adb import FakeAdbServer

SERIALS = ["emulator-5554", "emulator-5556"]
CONTACTS = APPS["contacts"]


@pytest.fixture(autouse=True)
def fresh_suite(monkeypatch):
    """Each test lists the suite from its own server (the registry keeps a suite per process)."""
    for name in ("ANDROIDWORLD_URL", "ANDROIDWORLD_FAMILY", "ANDROIDWORLD_SEED"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANDROIDWORLD_COMBINATIONS", "2")
    registry._CACHE.pop("androidworld", None)
    yield
    registry._CACHE.pop("androidworld", None)


@contextlib.contextmanager
def fleet(tmp_path, monkeypatch, n: int = 1):
    """``n`` fake emulators with AndroidWorld's apps on one adb server, each with its own
    AndroidWorld server; the suite is listed from the first."""
    devs = [device(s, apps=list(APPS.values())) for s in SERIALS[:n]]
    with FakeAdbServer(devs) as srv, contextlib.ExitStack() as stack:
        servers = [stack.enter_context(AndroidWorldStandIn(d)) for d in devs]
        monkeypatch.setenv("ANDROIDWORLD_URL", servers[0].url)
        urls = {d.serial: s.url for d, s in zip(devs, servers)}
        yield devs, servers, env_kwargs(srv.port, lock_dir=str(tmp_path), servers=urls)


def solve(obs: Observation, open_markor: bool = True) -> Action:
    """A scripted agent for the stand-in's tasks (``open_markor=False`` skips a needed step)."""
    goal, step = obs.instruction, obs.step
    if m := re.match(r"Open the (\w+) app", goal):
        return [Action.open_app(m.group(1).title()), Action.complete()][min(step, 1)]
    if m := re.match(r"What is (\d+) plus (\d+)\?", goal):
        return [Action.answer(str(int(m[1]) + int(m[2]))), Action.complete()][min(step, 1)]
    text = goal.rsplit(": ", 1)[1]
    plan = [Action.open_app("Markor")] if open_markor else []
    plan += [Action.type_text(text), Action.complete()]
    return plan[min(step, len(plan) - 1)]


# -- the suite --------------------------------------------------------------------------------
def test_the_suite_is_the_servers_instances_with_their_goals_and_budgets(tmp_path, monkeypatch):
    monkeypatch.setenv("ANDROIDWORLD_SEED", "7")
    with fleet(tmp_path, monkeypatch) as (_, (server,), _):
        tasks = resolve("androidworld")
        calls = [(m, p, q) for m, p, q, _ in server.requests]
        goals = {t.name: server.goal(t.params["task_type"], t.params["task_idx"]) for t in tasks}
        monkeypatch.setenv("ANDROIDWORLD_FAMILY", "information_retrieval")
        retrieval = androidworld_tasks()
        monkeypatch.setenv("ANDROIDWORLD_FAMILY", "miniwob")
        with pytest.raises(ConfigError, match=r"ANDROIDWORLD_FAMILY .* not one of"):
            androidworld_tasks()
    assert [t.name for t in tasks] == [
        f"androidworld/{name}/{i}"
        for name in ("MarkorCreateNote", "OpenAppTaskEval", "SumRetrieval")
        for i in (0, 1)
    ]
    assert calls[:3] == [
        ("GET", "/suite/reinitialize",
         {"n_task_combinations": "2", "seed": "7", "task_family": "android_world"}),
        ("GET", "/suite/task_list", {"max_index": "-1"}),
        ("GET", "/suite/task_length", {"task_type": "MarkorCreateNote"}),
    ]  # fmt: skip
    assert ("GET", "/task/goal", {"task_type": "SumRetrieval", "task_idx": "1"}) in calls
    for t in tasks:
        assert t.instruction == goals[t.name] and t.env == "androidworld"
        assert t.params["family"] == "android_world" and t.params["seed"] == 7
    # AndroidWorld's budgets (int(10 * complexity)); a type its source lacks gets the default
    assert [t.max_steps for t in tasks[::2]] == [16, 10, DEFAULT_BUDGET]
    assert [t.name for t in retrieval] == [f"androidworld/SumRetrieval/{i}" for i in (0, 1)]


def test_without_a_reachable_server_the_suite_is_refused_in_one_line(capsys, monkeypatch):
    from _holes import cli

    with pytest.raises(ConfigError, match="set ANDROIDWORLD_URL"):
        resolve("androidworld")
    r = cli(capsys, "tasks")
    assert r.code == 0 and "  androidworld - needs:" in r.out
    assert "AndroidWorld server" in r.out and "ANDROIDWORLD_URL not set" in r.out
    with socket_closed() as url:
        monkeypatch.setenv("ANDROIDWORLD_URL", url)
        r = cli(capsys, "tasks", "androidworld")
        needs = cli(capsys, "tasks").out
    line = r.one_line()
    assert r.code == 2 and line.startswith("devicerl tasks: error: androidworld: AndroidWorld")
    assert f"{url}: GET /suite/reinitialize: unreachable" in line
    assert f"ANDROIDWORLD_URL={url}: not reachable" in needs


@contextlib.contextmanager
def socket_closed():
    """The URL of a loopback port nothing listens on."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    yield f"http://127.0.0.1:{port}"


# -- one device -----------------------------------------------------------------------------
def run_episode(env, task, act=solve) -> list:
    obs, results = env.reset(task, seed=0), []
    while True:
        result = env.step(act(obs))
        results.append(result)
        if result.done:
            return results
        obs = result.observation


def app_of(task) -> tuple[str, str]:
    """The app an OpenAppTaskEval instance names, and the activity AndroidWorld starts for it."""
    name = re.match(r"Open the (\w+) app", task.instruction)[1]
    return name.title(), next(a for p, a in APPS.items() if re.match(p, name))


def answer(text: str):
    return lambda obs: Action.answer(text) if obs.step == 0 else Action.complete()


def test_the_server_initialises_scores_and_tears_down_each_episode(tmp_path, monkeypatch):
    with fleet(tmp_path, monkeypatch) as ((dev,), (server,), kwargs):
        tasks = {t.name.split("/", 1)[1]: t for t in resolve("androidworld")}
        env = make("androidworld", **kwargs)
        try:
            opened = run_episode(env, tasks["OpenAppTaskEval/0"])
            sent = [body for _, path, _, body in server.requests if path == "/execute_action"]
            started = dev.foreground
            note = run_episode(env, tasks["MarkorCreateNote/1"])
            typed = dev.typed
            unopened = run_episode(env, tasks["MarkorCreateNote/0"], lambda o: solve(o, False))
            answered = run_episode(env, tasks["SumRetrieval/0"])
            cache = server.interaction_cache
            wrong = run_episode(env, tasks["SumRetrieval/1"], answer("-1"))
            silent = run_episode(env, tasks["SumRetrieval/1"], lambda o: Action.complete())
        finally:
            env.close()
    # OPEN_APP goes to the server, which starts AndroidWorld's activity for the name over adb
    name, activity = app_of(tasks["OpenAppTaskEval/0"])
    assert sent == [{"action_type": "open_app", "app_name": name}] and started == activity
    assert opened[0].info["androidworld_action"] == sent[0]
    assert opened[-1].info["androidworld_score"] == 1.0 and opened[-1].reward == 1.0
    assert opened[-1].info["end_reason"] == EndReason.SUCCESS.value
    # typing goes over adb; the score reads what the device did
    assert note[-1].info["success"] and "adb_input" in note[1].info
    assert typed == tasks["MarkorCreateNote/1"].instruction.rsplit(": ", 1)[1]
    assert not unopened[-1].info["success"] and unopened[-1].info["end_reason"] == "agent_ended"
    # the answer reaches the information-retrieval checker (the server's interaction_cache)
    said = answered[0].info["androidworld_action"]
    assert said["action_type"] == "answer" and cache == said["text"]
    assert answered[-1].info["success"]
    assert not wrong[-1].info["success"] and wrong[-1].info["androidworld_score"] == 0.0
    assert not silent[-1].info["success"]
    # initialise and tear down once per episode, in that order
    assert [e[0] for e in server.events] == ["initialize", "tear_down"] * 6


def test_only_an_episode_the_agent_ends_can_succeed_and_adb_does_the_rest(tmp_path, monkeypatch):
    with fleet(tmp_path, monkeypatch) as ((dev,), (server,), kwargs):
        task = resolve("androidworld/OpenAppTaskEval/0")[0].with_max_steps(3)
        plan = [
            Action.open_app(app_of(task)[0]),
            Action.long_press(0.5, 0.5, 1.5),
            Action.wait(0.2),
        ]
        env = make("androidworld", **kwargs)
        try:
            t0 = time.monotonic()
            out = run_episode(env, task, lambda o: plan[o.step])
            waited = time.monotonic() - t0
            inputs = [c for c in dev.commands if c[0] == "input"]
        finally:
            env.close()
    assert out[-1].info["end_reason"] == "max_steps" and not out[-1].info["success"]
    assert out[-1].info["androidworld_score"] == 1.0  # solved, but the agent never said so
    assert inputs[-1] == ["input", "swipe", "135", "300", "135", "300", "1500"]  # the long press
    assert "adb_input" not in out[2].info and waited >= 0.2  # a wait sends nothing
    assert [e[0] for e in server.events] == ["initialize", "tear_down"]


def test_options_and_refusals(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match=r"set ANDROIDWORLD_URL .* servers"):
        make("androidworld")
    monkeypatch.setenv("ANDROIDWORLD_URL", "ftp://x")
    with pytest.raises(ConfigError, match="ANDROIDWORLD_URL: 'ftp://x' is not an http"):
        make("androidworld")
    with pytest.raises(ConfigError, match="no snapshot option"):
        make("androidworld", servers={"emulator-5554": "http://127.0.0.1:1"}, snapshot="s")
    with pytest.raises(ConfigError, match="serial 'emulator-9' has no entry in servers"):
        make("androidworld", servers={"emulator-5554": "http://127.0.0.1:1"}, serial="emulator-9")
    options = read_options("androidworld", {"servers": {}, "ui_elements": True})
    assert options.ui_elements and options.server_timeout_s == 300.0  # the android device's too
    with pytest.raises(ConfigError, match=r"unknown config key 'androidworld\.server'"):
        read_options("androidworld", {"server": "http://x"})
    with fleet(tmp_path, monkeypatch) as (_, _, kwargs):
        task = resolve("androidworld/SumRetrieval/0")[0]
        env = make("androidworld", **kwargs)
        try:
            changed = dataclasses.replace(task, instruction="What is 1 plus 1?")
            with pytest.raises(TaskError, match=r"gives the goal .* listed with"):
                env.reset(changed, seed=0)
            with pytest.raises(TaskError, match="not an AndroidWorld instance"):
                env.reset(Task("androidworld/x", "y", env="androidworld"), seed=0)
        finally:
            env.close()


def test_the_stand_in_answers_as_fastapi_does_and_the_client_maps_errors(tmp_path, monkeypatch):
    with fleet(tmp_path, monkeypatch) as (_, (server,), _):
        http = httpx.Client(base_url=server.url)
        missing = http.post("/task/initialize", params={"task_type": "SumRetrieval"})
        mistyped = http.get("/task/goal", params={"task_type": "SumRetrieval", "task_idx": "x"})
        family = http.get("/suite/reinitialize", params={"task_family": "nope"})
        unknown = http.get("/task/goal", params={"task_type": "Nope", "task_idx": 0})
        bad_action = http.post("/execute_action", json={"action_type": "fly"})
        client = AndroidWorldClient(server.url)
        inst = Instance("SumRetrieval", 0, SuiteParams(seed=42, combinations=2))
        client.initialize(inst)
        with pytest.raises(DeviceError, match=r"POST /task/initialize failed: HTTP 500"):
            client.initialize(inst)  # TaskEval.initialize_task twice
        client.tear_down(inst)
        with pytest.raises(DeviceError, match="GET /task/score failed: HTTP 500"):
            client.score(inst)  # not initialised
        http.close()
        client.close()
    assert missing.status_code == 422
    assert missing.json()["detail"][0]["loc"] == ["query", "task_idx"]
    assert mistyped.status_code == 422 and mistyped.json()["detail"][0]["type"] == "int_parsing"
    assert family.status_code == 400 and family.json() == {"detail": "Invalid task family: nope"}
    assert unknown.status_code == 500 and unknown.text == "Internal Server Error"
    assert bad_action.status_code == 500
    with socket_closed() as url, pytest.raises(DeviceCrashed, match="unreachable"):
        AndroidWorldClient(url).health()


# -- in the pool ------------------------------------------------------------------------------
def one_cut(out: list) -> bool:
    return any(t.is_truncated for t in out)


SUPERVISION = SupervisorConfig(
    step_timeout=20, reset_timeout=20, max_restarts=None, backoff_s=0.05, backoff_max_s=0.2
)


def test_the_pool_runs_androidworld_episodes_and_the_native_judge_reads_the_score(
    tmp_path, monkeypatch
):
    from devicerl.agents.base import FunctionPolicy
    from devicerl.runtime.acting.collector import Collector

    with fleet(tmp_path, monkeypatch, n=2) as (_, servers, kwargs):
        tasks = resolve("androidworld")
        sampler = TaskSampler(tasks, "sequential", cycle=False)
        policy = FunctionPolicy(lambda obs: [solve(o, open_markor=False) for o in obs])
        with EnvPool(
            [EnvSpec("androidworld", kwargs)] * 2,
            tasks=sampler,
            worker="subprocess",
            supervision=SUPERVISION,
        ) as pool:
            out = list(judge_each(Collector(pool, policy).collect(None), JudgeConfig()))
        events = [s.events for s in servers]
    assert sorted(t.task for t in out) == sorted(t.name for t in tasks)
    for t in out:  # the agent never opens Markor: those fail, the others succeed
        assert not t.is_truncated and t.success == ("MarkorCreateNote" not in t.task), t.task
        assert t.end_reason is (EndReason.SUCCESS if t.success else EndReason.AGENT_ENDED)
        assert t.judgement is None and NativeJudge().judge(t).success == t.success
        if "SumRetrieval" in t.task:
            assert t.answer == str(sum(map(int, re.findall(r"\d+", t.instruction))))
    assert all(e for e in events)  # both emulators ran episodes, each on its own server
    for server_events in events:
        inits = [e[1:] for e in server_events if e[0] == "initialize"]
        downs = [e[1:] for e in server_events if e[0] == "tear_down"]
        assert inits == downs and len(set(inits)) == len(inits)  # once per episode
    assert sum(len(e) for e in events) == 2 * len(tasks)


def test_the_server_down_mid_run_truncates_the_episode_and_the_pool_restarts(tmp_path, monkeypatch):
    with fleet(tmp_path, monkeypatch) as (_, (server,), kwargs):
        tasks = [t for t in resolve("androidworld") if "Markor" not in t.name] * 2
        down: list = []

        def take_down_third(ready) -> None:
            if len(server.events) == 5 and not down:  # the third episode just started
                server.stop()
                down.append(ready.task)

        with EnvPool(
            EnvSpec("androidworld", kwargs),
            tasks=TaskSampler(tasks, "sequential", cycle=False),
            worker="subprocess",
            supervision=SUPERVISION,
        ) as pool:
            out = drive(pool, one_cut, solve, take_down_third, limit_s=60)
            server.start()
            out += drive(pool, lambda o: pool.done, solve, limit_s=60)
            stats = pool.stats()
    cut = [t for t in out if t.is_truncated and "reset failed" not in t.truncation_cause]
    assert len(cut) == 1 and cut[0].task == down[0] and not cut[0].success
    assert cut[0].end_reason is EndReason.TRUNCATED and not cut[0].steps
    assert cut[0].extras["interrupted_action"]["type"] in ("OPEN_APP", "ANSWER")
    assert "AndroidWorld server" in cut[0].truncation_cause
    assert "unreachable" in cut[0].truncation_cause
    assert NativeJudge().judge(cut[0]).is_unknown  # never a failure
    assert stats["restarts"] >= 1
    done = [t for t in out if not t.is_truncated]
    assert len(done) + len(out) - len(done) == len(tasks)  # every instance ended, once
    assert len(done) >= 6 and all(t.success for t in done)
    # the cut episode's task went down with its server; every other one was torn down
    assert server.count("initialize") == server.count("tear_down") + 1
