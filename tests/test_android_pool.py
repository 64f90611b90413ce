"""Android devices in the pool: episodes, restarts after hangs and crashes, VLM judging.

Every device is a real `AndroidEnv` in a pool worker, talking adbutils to `FakeAdbServer`.
"""

from __future__ import annotations

import base64
import io
import re
import time

import numpy as np
import pytest
from android_helpers import COLOURS, device, drive, env_kwargs
from judge_helpers import labelled, verdict_text
from PIL import Image

from devicerl.actions import Action
from devicerl.agents.base import FunctionPolicy
from devicerl.config import config_source, load_config
from devicerl.envs import EnvSpec
from devicerl.envs.android import AndroidEnv
from devicerl.judges import JudgeConfig, is_labelled
from devicerl.pool import EnvPool, SupervisorConfig
from devicerl.pool.workers.base import DeviceRecipe
from devicerl.records import EndReason, Observation
from devicerl.runtime.acting.collector import Collector
from devicerl.runtime.acting.judging import judge_each
from devicerl.runtime.setup.config import TrainConfig
from devicerl.tasks import Task, TaskSampler
from devicerl.testing.chat_server import Reply, ScriptedChatServer
from devicerl.testing.fake_adb import FakeAdbServer

#: "Tap N times": the agent taps N times, then says the task is complete.
TASKS = [
    Task(f"aitw/general/{n:04d}", instruction=f"Tap {n} times", max_steps=6, env="android")
    for n in (1, 2, 3)
]
SERIALS = ["emulator-5554", "emulator-5556"]


def _taps(instruction: str) -> int:
    return int(re.match(r"Tap (\d) times", instruction).group(1))


def _act(obs: Observation) -> Action:
    return Action.tap(0.5, 0.5) if obs.step < _taps(obs.instruction) else Action.complete()


def _pool(srv: FakeAdbServer, tmp_path, worker: str, mode: str = "random", **kw) -> EnvPool:
    spec = EnvSpec("android", env_kwargs(srv.port, lock_dir=str(tmp_path), **kw))
    config = SupervisorConfig(
        step_timeout=20, reset_timeout=20, max_restarts=None, backoff_s=0.05, backoff_max_s=0.2
    )
    return EnvPool(
        [spec] * 2, tasks=TaskSampler(TASKS, mode, seed=0), worker=worker, supervision=config
    )


def _cut_by(error: str):
    return lambda out: any(error in (t.truncation_cause or "") for t in out)


def _complete(n: int):
    return lambda out: sum(not t.is_truncated for t in out) >= n


@pytest.mark.parametrize("worker", ["serial", "subprocess"])
def test_pool_episodes_on_two_devices(worker, tmp_path) -> None:
    devs = [device(s) for s in SERIALS]

    def serials(out: list) -> set:
        return {t.steps[0].observation.extras["serial"] for t in out if t.steps}

    # a worker that starts first may finish several episodes before the other's first one
    with FakeAdbServer(devs) as srv, _pool(srv, tmp_path, worker) as pool:
        out = drive(pool, lambda o: _complete(6)(o) and serials(o) == set(SERIALS), _act)
    assert all(not t.is_truncated for t in out)
    used = set()
    for t in out:
        n = _taps(t.instruction)
        assert t.end_reason is EndReason.AGENT_ENDED and not t.success and t.device == "android"
        assert len(t.steps) == n + 1 and [s.action.is_tap for s in t.steps[:n]] == [True] * n
        serial = t.steps[0].observation.extras["serial"]
        used.add(serial)
        frames = [s.observation.screenshot for s in t.steps] + [t.final_observation.screenshot]
        for k, frame in enumerate(frames):  # HOME shows screen 0, each tap the next screen
            expected = devs[SERIALS.index(serial)].screens[min(k, n) % 3].image
            np.testing.assert_array_equal(frame, expected)
    assert used == set(SERIALS)  # the two workers claimed different devices
    taps = sum(len([c for c in d.inputs if c[:2] == ["input", "tap"]]) for d in devs)
    assert taps >= sum(_taps(t.instruction) for t in out)  # plus any episode still running


@pytest.mark.parametrize("worker", ["serial", "subprocess"])
def test_hangs_and_crashes_become_restarts_and_truncated_episodes(worker, tmp_path) -> None:
    devs = [device(s) for s in SERIALS]
    with FakeAdbServer(devs) as srv, _pool(srv, tmp_path, worker, command_timeout_s=0.5) as pool:
        out = drive(pool, _complete(2), _act)
        devs[0].hang = True  # stops answering: the env's deadline raises DeviceTimeout
        out += drive(pool, _cut_by("DeviceTimeout"), _act)
        devs[0].hang = False
        out += drive(pool, _complete(2), _act)
        srv.drop()  # the adb server dies: DeviceCrashed
        out += drive(pool, _cut_by("DeviceCrashed"), _act)
        time.sleep(0.3)
        srv.restart()
        out += drive(pool, _complete(4), _act)
        stats = pool.stats()
    truncated = [t for t in out if t.is_truncated]
    causes = " | ".join(t.truncation_cause for t in truncated)
    assert "DeviceTimeout" in causes and "DeviceCrashed" in causes, causes
    assert all(not t.success and t.end_reason is EndReason.TRUNCATED for t in truncated)
    assert stats["restarts"] >= 2 and stats["retired"] == 0
    for t in out:
        if not t.is_truncated:
            assert len(t.steps) == _taps(t.instruction) + 1  # complete episodes stay whole


def _green_last_screen(body: dict) -> Reply:
    """A judge that looks at the last screenshot it is shown: success on the green screen."""
    images = [p for p in body["messages"][-1]["content"] if p["type"] == "image_url"]
    data = base64.b64decode(images[-1]["image_url"]["url"].split(",", 1)[1])
    pixels = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    colour = tuple(int(v) for v in pixels[pixels.shape[0] * 3 // 4, 2])
    return Reply(verdict_text(colour == COLOURS[2], f"background {colour}"))


def test_vlm_judge_labels_android_episodes(tmp_path) -> None:
    with (
        FakeAdbServer([device(s) for s in SERIALS]) as srv,
        ScriptedChatServer(_green_last_screen) as chat,
    ):
        config = load_config(
            JudgeConfig,
            None,
            [
                "kind=vlm",
                f"chat.base_url={chat.base_url}",
                "chat.model=judge-model",
                f"vlm.cache_path={tmp_path / 'cache.sqlite'}",
            ],
        )
        policy = FunctionPolicy(lambda observations: [_act(o) for o in observations])
        with _pool(srv, tmp_path, "subprocess", mode="sequential") as pool:
            out = labelled(judge_each(Collector(pool, policy).collect(None), config), 9)
    done = [t for t in out if is_labelled(t) and not t.is_truncated]
    assert len(done) == 9
    for t in done:  # 2 taps end on the green screen: the judge's success, not the device's
        assert t.success == (_taps(t.instruction) == 2), t.judgement.verdict
        assert t.judgement.native_success is False and t.judgement.verdict["judge"] == "vlm"
        assert t.total_reward == float(t.success)
    # tasks are handed out 1, 2, 3, 1, ...: of 9 finished, at most 2 of the first 9 are missing
    assert any(t.success for t in done) and not all(t.success for t in done)


def test_the_aitw_training_config_builds_android_devices() -> None:
    cfg = load_config(TrainConfig, config_source("aitw-autoui-digirl-online"))
    recipe = DeviceRecipe.from_spec(EnvSpec(cfg.env.name, cfg.env.options))
    env = recipe.make()  # no device I/O until the first reset
    assert isinstance(env, AndroidEnv) and env.serial is None and env.adb_port == 5037
    env.close()
