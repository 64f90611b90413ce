"""Devices in their own Python environment: the plain-data protocol, the foreign process, and
a foreign device in the pool when it crashes or hangs.

The other environment is BrowserGym's (``playwright==1.44``, ours is newer), built once by
`devicerl.envs.foreign.venv.ensure_env` and cached outside the repository; the device that runs
there is ``tests/foreign_device.py`` (it imports nothing from devicerl)."""

from __future__ import annotations

import io
import re
import struct
from importlib.metadata import version
from pathlib import Path

import numpy as np
import psutil
import pytest
from pool_helpers import children_now, wait_clean

from devicerl.actions import Action
from devicerl.envs import EnvSpec, make
from devicerl.envs.browsergym.env import REQUIREMENTS
from devicerl.envs.foreign.plain import observation_from_plain, status_from_plain
from devicerl.envs.foreign.remote import ProtocolError, encode, read_frame
from devicerl.envs.foreign.venv import build_record, ensure_env
from devicerl.errors import ConfigError, DeviceCrashed, DeviceError
from devicerl.pool import EnvPool, SupervisorConfig
from devicerl.records import EndReason
from devicerl.tasks import Task, TaskSampler

DEVICE = f"{Path(__file__).with_name('foreign_device.py')}:ScriptedDevice"
TASK = Task("foreign-test/press", max_steps=4)
PRESS = Action.tap(0.5, 0.5)  # the button's box is x in [2, 4] of 6: normalised 0.33-0.67


@pytest.fixture(scope="module")
def python() -> str:
    built = ensure_env(REQUIREMENTS)
    print(f"foreign environment {built}: {build_record(built)}")
    return str(built)


def spec(python: str, **options) -> EnvSpec:
    return EnvSpec("foreign", {"python": python, "device": DEVICE, "options": options})


# -- the protocol -----------------------------------------------------------------------------
def test_frames_carry_plain_data_and_raw_arrays() -> None:
    shot = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    frame = encode({"observation": {"instruction": "hi", "screenshot": shot}, "n": np.int64(7)})
    message, blob = read_frame(io.BytesIO(frame))
    assert message["n"] == 7 and message["observation"]["screenshot"]["shape"] == [2, 3, 3]
    obs = observation_from_plain(message["observation"], blob)
    assert np.array_equal(obs.screenshot, shot) and obs.screen_size == (3, 2)


def test_a_corrupt_frame_is_refused_without_allocating_what_it_announces() -> None:
    with pytest.raises(ProtocolError, match="announces"):
        read_frame(io.BytesIO(struct.pack(">II", 2**31, 0)))
    with pytest.raises(ProtocolError, match="not UTF-8 JSON"):
        read_frame(io.BytesIO(struct.pack(">II", 3, 0) + b"{x}"))


@pytest.mark.parametrize(
    "obs,why",
    [
        ({"instruction": "a", "screen_size": [3, 2], "pixels": 1}, "unknown field 'pixels'"),
        ({"instruction": 5, "screen_size": [3, 2]}, "'instruction' is a int, not str"),
        ({"instruction": "a", "screen_size": [3, 2], "elements": [{"id": "x", "bbox": [0, 1]}]},
         "bbox \\[0, 1\\] is not 4 numbers"),
        ({"instruction": "a", "screenshot": {"__blob__": [0, 4], "shape": [2, 2],
          "dtype": "uint8"}}, "not H x W x 3"),
        ({"instruction": "a", "screenshot": {"__blob__": [0, 99], "shape": [2, 2, 3],
          "dtype": "uint8"}}, "outside the frame"),
    ],
)  # fmt: skip
def test_what_a_foreign_device_sends_is_checked_field_by_field(obs, why) -> None:
    with pytest.raises(ProtocolError, match=why):
        observation_from_plain(obs, b"\0" * 12)


def test_a_status_passes_task_info_through_and_refuses_a_nan_reward() -> None:
    status = status_from_plain({"done": True, "success": False, "info": {"REASON": "timeout"}})
    assert status.done and not status.success and status.info == {"REASON": "timeout"}
    with pytest.raises(ProtocolError, match="not finite"):
        status_from_plain({"raw_reward": float("nan")})


# -- one foreign device -----------------------------------------------------------------------
def test_a_device_runs_in_another_environment_with_other_package_versions(python) -> None:
    env = make("foreign", python=python, device=DEVICE)
    try:
        assert env.versions["playwright"] == "1.44.0" != version("playwright")
        obs = env.reset(TASK, seed=9)
        assert obs.instruction == "press OK (foreign-test/press)"
        assert obs.screenshot.shape == (4, 6, 3) and int(obs.screenshot[0, 0, 0]) == 9
        assert obs.elements[0].id == "b1" and obs.elements[0].center == (3.0, 2.0)
        result = env.step(PRESS)
        assert result.terminated and result.reward == 1.0 and result.info["end_reason"] == "success"
        assert result.info["seen"] == PRESS.to_dict()  # the action crossed as plain data
        assert result.observation.elements[0].text == "pressed"
        pid = env.process.pid
    finally:
        env.close()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.parametrize(
    "fail,error,message",
    [
        ("config", ConfigError, "foreign device .*: the server at WA_SHOPPING is not set"),
        ("import", ConfigError, "No module named 'not_a_package_anywhere'"),
    ],
)
def test_an_error_no_restart_fixes_is_a_config_error_in_one_line(python, fail, error, message):
    with pytest.raises(error, match=message) as caught:
        make("foreign", python=python, device=DEVICE, options={"fail_start": fail})
    assert "\n" not in str(caught.value)


def test_a_crash_and_an_error_inside_the_device_keep_their_meaning(python) -> None:
    env = make("foreign", python=python, device=DEVICE)
    try:
        env.reset(TASK, seed=1)
        with pytest.raises(DeviceError, match=r"RuntimeError: .*the page went away"):
            env.step(Action.type_text("raise"))
        env.reset(TASK, seed=2)
        with pytest.raises(DeviceCrashed, match=r"died \(exit code 3\)"):
            env.step(Action.type_text("crash"))
    finally:
        env.close()


def test_a_missing_interpreter_is_refused_in_one_line(tmp_path) -> None:
    with pytest.raises(ConfigError, match="is not an executable file"):
        make("foreign", python=str(tmp_path / "python"), device=DEVICE)


# -- in the pool --------------------------------------------------------------------------------
def _play(pool: EnvPool, commands: list[str], want: int) -> list:
    """Step every ready device: the next command of ``commands`` (typed), then presses."""
    finished, pids = [], []
    while len(finished) < want:
        ready = pool.recv(min_ready=1, timeout=60)
        assert ready, pool.stats()
        finished += [r.trajectory for r in ready if r.trajectory is not None]
        acting = [r for r in ready if r.observation is not None]
        pids += [r.observation.extras["pid"] for r in acting]
        actions = [Action.type_text(commands.pop(0)) if commands else PRESS for _ in acting]
        if acting:
            pool.send(actions, [r.env_id for r in acting])
    return finished, pids


@pytest.mark.parametrize(
    "command,cause",
    [("crash", r"DeviceCrashed: foreign device .* died \(exit code 3\)"),
     ("hang", r"step timed out after 3\.0s")],
)  # fmt: skip
def test_the_pool_truncates_and_restarts_a_foreign_worker_that_crashes_or_hangs(
    python, command, cause
) -> None:
    baseline = children_now()
    pool = EnvPool(
        spec(python),
        tasks=TaskSampler([TASK], seed=0),
        supervision=SupervisorConfig(step_timeout=3.0, reset_timeout=60.0, backoff_s=0.01),
    )
    tag = pool.backend.tag
    try:
        finished, pids = _play(pool, [command], want=3)
        cut, *rest = finished
        assert cut.end_reason is EndReason.TRUNCATED, cut
        assert re.search(cause, cut.truncation_cause or ""), cut.truncation_cause
        assert [t.end_reason for t in rest] == [EndReason.SUCCESS] * 2  # the restarted device
        assert pool.stats()["restarts"] == 1
        first = pids[0]
        assert first != pids[-1] and not _alive(first)  # the foreign process went with it
    finally:
        pool.close()
    tagged, children = wait_clean(tag, baseline)
    assert not tagged and not children, (tagged, children)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.mark.ray
@pytest.mark.slow
def test_a_foreign_device_is_placed_on_ray_like_any_other(python, monkeypatch) -> None:
    """On Ray workers the foreign process runs beside its actor and dies with it."""
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    pool = EnvPool(
        spec(python),
        tasks=TaskSampler([TASK], seed=0),
        worker="ray",
        worker_options={"num_cpus": 0.25, "init_kwargs": {"num_cpus": 2}},
        supervision=SupervisorConfig(step_timeout=30.0, reset_timeout=60.0, backoff_s=0.01),
    )
    try:
        finished, pids = _play(pool, ["crash"], want=2)
        assert [t.end_reason for t in finished] == [EndReason.TRUNCATED, EndReason.SUCCESS]
        assert "died (exit code 3)" in (finished[0].truncation_cause or "")
        assert not _alive(pids[0]) and _alive(pids[-1])
    finally:
        pool.close()
    assert not _alive(pids[-1])
