import os
import time

import numpy as np
import pytest

from devicerl.actions import Action
from devicerl.envs import EnvSpec, make
from devicerl.envs.synthetic import Faults, Latency
from devicerl.errors import ConfigError, DeviceCrashed, DeviceError
from devicerl.records import Observation


def _target(obs: Observation, label: str):
    return next(e for e in obs.elements if e.text == label)


def _tap(obs: Observation, el) -> Action:
    return Action.tap(*obs.to_normalised(*el.center))


def test_tap_task_success_and_failure() -> None:
    env = make("synthetic/tap", n_boxes=5)
    obs = env.reset(seed=3)
    assert obs.screenshot is not None and obs.screenshot.shape == (585, 270, 3)
    assert obs.screenshot.dtype == np.uint8
    label = obs.instruction.rsplit(" ", 1)[-1]
    r = env.step(_tap(obs, _target(obs, label)))
    assert r.terminated and r.reward == 1.0 and r.info["success"]
    assert r.info["end_reason"] == "success"

    obs = env.reset(seed=3)
    label = obs.instruction.rsplit(" ", 1)[-1]
    wrong = next(e for e in obs.elements if e.text != label)
    r = env.step(_tap(obs, wrong))
    assert r.terminated and r.reward == 0.0 and r.info["end_reason"] == "failure"


def test_type_task_needs_focus_then_text() -> None:
    env = make("synthetic/type")
    obs = env.reset(seed=11)
    words = obs.instruction.split()
    word, label = words[1], words[-1]
    r = env.step(Action.type_text(word))  # nothing focused yet
    assert not r.done
    r = env.step(_tap(obs, _target(obs, label)))
    assert not r.done and _target(r.observation, label).focused
    r = env.step(Action.type_text(word))
    assert r.terminated and r.info["success"]


def test_max_steps_truncates_and_invalid_is_noop() -> None:
    env = make("synthetic/tap")
    env.reset(seed=1)
    for i in range(5):
        r = env.step(Action.invalid("xx", "garbage"))
        assert r.info["invalid_action"] == "garbage"
        assert r.observation.step == i + 1
    assert r.truncated and not r.terminated and r.info["end_reason"] == "max_steps"
    with pytest.raises(RuntimeError):
        env.step(Action.back())


def test_agent_ended() -> None:
    env = make("synthetic/tap")
    env.reset(seed=1)
    r = env.step(Action.impossible())
    assert r.terminated and r.info["end_reason"] == "agent_ended" and r.reward == 0


def test_deterministic_from_seed() -> None:
    a, b = make("synthetic/type"), make("synthetic/type")
    oa, ob = a.reset(seed=42), b.reset(seed=42)
    assert oa.instruction == ob.instruction
    assert np.array_equal(oa.screenshot, ob.screenshot)
    assert [e.bbox for e in oa.elements] == [e.bbox for e in ob.elements]


def test_steps_task_lengths_vary() -> None:
    env = make("synthetic/steps", min_len=1, max_len=10, render=False)
    lengths = set()
    for seed in range(40):
        obs = env.reset(seed=seed)
        assert obs.screenshot is None
        n = 0
        while True:
            n += 1
            if env.step(Action.back()).done:
                break
        lengths.add(n)
    assert min(lengths) == 1 and max(lengths) == 10


def test_latency_models() -> None:
    rng = np.random.default_rng(0)
    u = Latency.parse("uniform:0.05,0.3")
    draws = [u.sample(rng) for _ in range(2000)]
    assert min(draws) >= 0.05 and max(draws) <= 0.3
    ln = Latency(kind="lognormal", median=0.02, sigma=1.0, slow_prob=0.02, slow_factor=20)
    draws = np.array([ln.sample(rng) for _ in range(20000)])
    assert abs(np.median(draws) - 0.02) < 0.003
    assert abs(draws.mean() / ln.mean - 1) < 0.15
    assert Latency.parse(0.1).kind == "constant"
    with pytest.raises(ConfigError):
        Latency.parse("weird:1")


def test_latency_is_simulated() -> None:
    env = make("synthetic/tap", step_latency=0.05, reset_latency=0.02)
    t = time.perf_counter()
    obs = env.reset(seed=0)
    env.step(Action.tap(0.0, 0.0))
    assert time.perf_counter() - t >= 0.07
    assert obs.extras["reset_time_s"] >= 0.02


def test_faults_in_main_process_raise() -> None:
    env = make("synthetic/tap", faults=Faults(die=1.0))
    env.reset(seed=0)
    assert "DEVICERL_WORKER" not in os.environ
    with pytest.raises(DeviceCrashed):
        env.step(Action.back())
    env = make("synthetic/tap", faults={"error": 1.0, "on_reset": True})
    with pytest.raises(DeviceError):
        env.reset(seed=0)
    env = make("synthetic/tap", faults={"hang": 1.0, "hang_s": 0.05})
    env.reset(seed=0)
    t = time.perf_counter()
    env.step(Action.back())
    assert time.perf_counter() - t >= 0.05


def test_registry_errors_and_spec() -> None:
    with pytest.raises(ConfigError, match="unknown device"):
        make("nope")
    with pytest.raises(ConfigError):
        make("synthetic", n_boxes=0)
    spec = EnvSpec("synthetic/tap", {"n_boxes": 3})
    assert len(spec.make().reset(seed=0).elements) == 3


def test_closed_env_refuses() -> None:
    env = make("synthetic")
    env.close()
    with pytest.raises(RuntimeError):
        env.reset("synthetic/tap", seed=0)
