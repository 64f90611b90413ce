"""Shared test helpers: real trajectories, an exact comparison, the real CLI."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Any

import numpy as np
import psutil

from devicerl.actions import Action
from devicerl.agents import FunctionPolicy, RandomPolicy
from devicerl.envs import make
from devicerl.records import EndReason, Observation, Trajectory, UIElement
from devicerl.runtime.acting.rollout import rollout


def element_at(obs: Observation, x: float, y: float) -> UIElement | None:
    """The smallest element of ``obs`` containing the normalised point, if any."""
    px, py = obs.to_pixels(x, y)
    hits = [e for e in obs.elements if e.contains(px, py)]
    return min(hits, key=lambda e: e.area) if hits else None


def swipe_then_complete(observations: list[Observation]) -> list[Action]:
    """A policy that swipes on the first step and declares the task complete afterwards."""
    return [
        Action.swipe(0.5, 0.8, 0.5, 0.2) if o.step == 0 else Action.complete() for o in observations
    ]


def collect(n: int, *, screen=(96, 160), seed: int = 0) -> list[Trajectory]:
    """``n`` real synthetic-device episodes over the tap/type/steps tasks, decorated with the
    optional fields a real run fills in (verdicts, log-probs, texts, extras with arrays)."""
    env = make("synthetic", screen=screen, seed=seed, n_boxes=3)
    policy = RandomPolicy(seed=seed)
    tasks = ["synthetic/tap", "synthetic/type", "synthetic/steps"]
    out = []
    for i in range(n):
        t = rollout(env, policy, tasks[i % 3], seed=seed * 1000 + i, env_id=i % 2)
        for j, s in enumerate(t.steps):
            s.text = f'Action Decision: "{s.action.type.value}" #{j}'
            s.log_prob = -0.5 * (j + 1)
            s.policy_version = i
            s.verdict = {"judge": "task", "success": t.success, "step": j} if j % 2 else None
            if s.observation.elements:
                s.observation.elements[0].attrs = {"tag": "div", "classes": ["a", "b"]}
        t.extras = {"collector": "test", "features": np.arange(6, dtype=np.float32).reshape(2, 3)}
        out.append(t)
    env.close()
    return out


def swipe_episode(seed: int = 0) -> Trajectory:
    env = make("synthetic", screen=(96, 160), seed=seed)
    t = rollout(env, FunctionPolicy(swipe_then_complete), "synthetic/tap", seed=seed)
    t.steps[0].verdict = {"judge": "vlm", "success": False, "reason": "swiped <b>away</b>"}
    env.close()
    return t


def truncated_at_reset() -> Trajectory:
    return Trajectory(task="synthetic/tap", instruction="", seed=3).end(
        EndReason.TRUNCATED, cause="reset: DeviceCrashed: gone"
    )


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and np.array_equal(a, b)
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if dataclasses.is_dataclass(a) and type(a) is type(b):
        return all(_equal(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return a == b


def assert_same(a: Trajectory, b: Trajectory) -> None:
    """Field-by-field equality, arrays compared exactly (tuples and lists count as equal)."""
    for f in dataclasses.fields(Trajectory):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name == "steps":
            assert len(x) == len(y), f"{len(x)} vs {len(y)} steps"
            for i, (s, t) in enumerate(zip(x, y)):
                for g in dataclasses.fields(s):
                    sx, sy = getattr(s, g.name), getattr(t, g.name)
                    assert _equal(sx, sy), f"step {i} field {g.name}: {sx!r} != {sy!r}"
        else:
            assert _equal(x, y), f"trajectory field {f.name}: {x!r} != {y!r}"


def devicerl_cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run the real ``devicerl`` entry point in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "devicerl", *args], capture_output=True, text=True, timeout=timeout
    )


def tagged_processes(tag: str) -> list[psutil.Process]:
    """The live processes started with ``DEVICERL_TEST_TAG=tag`` in their environment."""
    out = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("DEVICERL_TEST_TAG") == tag:
                out.append(p)
        except (psutil.Error, OSError):
            continue
    return out
