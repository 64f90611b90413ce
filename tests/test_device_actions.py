"""Long press, open app, wait and answer on the synthetic and Android devices, and an answer
reaching the task's check and the judges.

Android runs at the ADB boundary: the real `AndroidEnv` and adbutils against `FakeAdbServer`,
whose device lists its launcher activities for ``cmd package query-activities --components`` in
the format of AOSP's PackageManagerShellCommand (platform_frameworks_base, read at commit
008fb5cf14a3c9eb4b45cbfe42e5c1b747b166a0) and starts them for ``am start -n``; no emulator
checked what a real launcher lists. The long press's held swipe and the one-second defaults
follow AndroidWorld's adb_utils (google-research/android_world at commit d9c569f7).
"""

from __future__ import annotations

import time

import pytest
from android_helpers import device, env_kwargs
from judge_helpers import chat_config, verdict_text

from devicerl.actions import Action, ActionType
from devicerl.envs import make
from devicerl.envs.android.apps import AppCatalog
from devicerl.records import EndReason, Step, Trajectory
from devicerl.runtime.acting.rollout import rollout
from devicerl.tasks import Task
from devicerl.testing.chat_server import ScriptedChatServer

TASK = Task("aitw/general/0001", instruction="Open the clock", max_steps=8, env="android")
APPS = [
    "com.android.settings/.Settings",
    "com.google.android.calendar/com.android.calendar.AllInOneActivity",
    "com.simplemobiletools.calendar.pro/.activities.SplashActivity",
    "com.google.android.deskclock/com.android.deskclock.DeskClock",
    "com.google.android.gm/.ConversationListActivityGmail",
    "org.videolan.vlc/.StartActivity",
]


# -- synthetic ----------------------------------------------------------------------------------
def _answer_env():
    env = make("synthetic", screen=(96, 160), seed=0)
    obs = env.reset("synthetic/answer", seed=4)
    assert obs.instruction == "How many boxes are there? Answer with the number."
    return env, obs


def test_the_synthetic_answer_task_checks_the_last_answer() -> None:
    env, obs = _answer_env()
    n = len(obs.elements)
    wrong = env.step(Action.answer(str(n + 1)))
    assert not wrong.done and wrong.reward == 0.0 and env.answer == str(n + 1)  # ends nothing
    right = env.step(Action.answer(f" {n} "))
    assert right.terminated and right.reward == 1.0 and right.info["end_reason"] == "success"
    env.reset("synthetic/answer", seed=4)
    assert env.answer is None  # an episode starts without an answer
    env.close()


def test_an_answer_alone_ends_nothing_elsewhere() -> None:
    env = make("synthetic", screen=(96, 160), seed=0)
    env.reset("synthetic/tap", seed=1)
    r = env.step(Action.answer("done"))
    assert not r.done and r.reward == 0.0 and "invalid_action" not in r.info
    env.close()


def test_synthetic_long_press_and_wait_change_nothing_and_open_app_is_invalid() -> None:
    env = make("synthetic", screen=(96, 160), seed=0)
    obs = env.reset("synthetic/tap", seed=1)
    target = next(e for e in obs.elements if obs.instruction.endswith(e.text))
    r = env.step(Action.long_press(*obs.to_normalised(*target.center)))
    assert not r.done and r.reward == 0.0  # a long press is no tap
    assert env.step(Action.wait(0.5)).observation.same_screen(obs)
    r = env.step(Action.open_app("Settings"))
    assert r.info["invalid_action"] == "the synthetic device has no apps to open" and not r.done
    assert env.step(Action.tap(*obs.to_normalised(*target.center))).reward == 1.0
    env.close()


def test_answer_reaches_the_task_check_and_the_native_judge_through_a_rollout() -> None:
    from devicerl.agents.scripted import SyntheticOracle
    from devicerl.judges.native import NativeJudge

    env = make("synthetic", screen=(96, 160), seed=0)
    traj = rollout(env, SyntheticOracle(), "synthetic/answer", seed=7)
    env.close()
    assert [s.action.type for s in traj.steps] == [ActionType.ANSWER]
    assert traj.answer == str(len(traj.steps[0].observation.elements))
    assert traj.end_reason is EndReason.SUCCESS and NativeJudge().judge(traj).success is True


# -- judges -------------------------------------------------------------------------------------
def test_the_vlm_judge_sees_the_answer_given_by_the_judged_step(tmp_path) -> None:
    from devicerl.judges.config import VLMJudgeConfig
    from devicerl.judges.vlm import VLMJudge

    env = make("synthetic", screen=(96, 160), seed=0)
    traj = rollout(env, _answers("7", "8"), "synthetic/tap", seed=1)
    env.close()
    assert traj.answer == "8" and traj.answer_by(0) == "7" and traj.answer_by(-1) == "8"
    seen: list[str] = []

    def respond(body: dict) -> str:
        seen.append(body["messages"][-1]["content"][0]["text"])
        return verdict_text(True)

    with ScriptedChatServer(respond) as srv:
        judge = VLMJudge(chat_config(srv.base_url), VLMJudgeConfig(cache_path=None))
        judge.judge_step(traj, 0)
        judge.judge(traj)
        judge.close()
    assert "answer('7')" in seen[0] and 'The agent\'s answer to the user: "7".' in seen[0]
    assert 'The agent\'s answer to the user: "8".' in seen[1]
    silent = Trajectory("t", "Tap the box", steps=[Step(traj.steps[0].observation, Action.back())])
    assert silent.answer is None


def _answers(*texts: str):
    from devicerl.agents.base import FunctionPolicy

    queue = [Action.answer(t) for t in texts]
    return FunctionPolicy(lambda obs: [queue.pop(0) if queue else Action.impossible()])


# -- Android at the ADB boundary ------------------------------------------------------------------
@pytest.fixture
def phone(tmp_path):
    from devicerl.testing.fake_adb import FakeAdbServer

    with FakeAdbServer([device(apps=APPS)]) as srv:
        env = make("android", **env_kwargs(srv.port, lock_dir=str(tmp_path)))
        env.reset(TASK, seed=0)
        yield env, srv.devices["emulator-5554"]
        env.close()


def test_android_long_press_is_a_held_swipe(phone) -> None:
    env, dev = phone
    del dev.commands[:]
    r = env.step(Action.long_press(0.5, 0.55, 2.5))
    assert dev.inputs == [["input", "swipe", "135", "330", "135", "330", "2500"]]
    assert r.info["adb_input"] == "input swipe 135 330 135 330 2500"


def test_android_open_app_resolves_names_through_the_apps_the_phone_lists(phone) -> None:
    env, dev = phone
    for name, component in [
        ("Clock", APPS[3]),
        ("Calendar", APPS[1]),  # fewest unexplained package parts
        ("Simple Calendar Pro", APPS[2]),
        ("gmail", APPS[4]),  # an alias: the package does not hold the name
        ("VLC", APPS[5]),
        ("com.android.settings", APPS[0]),  # a package name
    ]:
        del dev.commands[:]
        r = env.step(Action.open_app(name))
        assert dev.inputs == [["am", "start", "-n", component]], name
        assert dev.foreground == component and "invalid_action" not in r.info
        assert r.info["adb_input"].startswith(f"am start -n {component}\nStarting: Intent")
    queries = [line for line in dev.lines if "query-activities" in line]
    assert len(queries) == 1  # read once per connection


def test_android_unknown_app_is_invalid_with_the_reason_and_sends_nothing(phone) -> None:
    env, dev = phone
    del dev.commands[:]
    r = env.step(Action.open_app("Spotify"))
    reason = r.info["invalid_action"]
    assert reason.startswith("open_app: no launchable app on the phone matches 'Spotify'")
    assert "com.android.settings" in reason and not r.done
    assert [c for c in dev.inputs if c[:2] == ["am", "start"]] == []


def test_android_wait_sends_nothing_and_waits_answer_is_recorded(phone) -> None:
    env, dev = phone
    del dev.commands[:]
    t0 = time.monotonic()
    r = env.step(Action.wait(0.3))
    assert time.monotonic() - t0 >= 0.3  # a lower bound: the device slept the wait
    assert dev.inputs == [] and "adb_input" not in r.info and not r.done
    r = env.step(Action.answer("7:30"))
    assert dev.inputs == [] and env.answer == "7:30" and not r.done


def test_a_phone_without_launcher_apps_makes_open_app_invalid(tmp_path) -> None:
    from devicerl.testing.fake_adb import FakeAdbServer

    with FakeAdbServer([device()]) as srv:
        env = make("android", **env_kwargs(srv.port, lock_dir=str(tmp_path)))
        env.reset(TASK, seed=0)
        r = env.step(Action.open_app("Clock"))
        assert "(apps: none)" in r.info["invalid_action"]
        env.close()


def test_app_catalog_reads_both_output_forms_and_keeps_the_first_activity() -> None:
    brief = (
        "2 activities found:\n  Activity #0:\n    priority=0 preferredOrder=0 match=0x108000 "
        "specificIndex=-1 isDefault=false\n    com.android.settings/.Settings\n"
        "  Activity #1:\n    priority=0 isDefault=false\n    com.android.settings/.Other\n"
    )
    assert AppCatalog.parse(brief).components == {
        "com.android.settings": "com.android.settings/.Settings"
    }
    assert AppCatalog.parse("No activities found\n").components == {}
    catalog = AppCatalog.parse("\n".join(APPS))
    assert catalog.resolve("Whatsapp")[0] is None and catalog.resolve("Settings")[0] == APPS[0]
