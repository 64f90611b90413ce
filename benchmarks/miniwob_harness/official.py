"""The official ``miniwob`` gymnasium env (Selenium + ChromeDriver), for side-by-side checks.

Used by the fidelity and throughput benchmarks: `official_env` builds one with the system
Chromium and ChromeDriver (``MINIWOB_CHROME_BINARY`` and ``MINIWOB_CHROMEDRIVER`` together,
otherwise Selenium Manager tries the internet) and a private ``TMPDIR``, so the
``org.chromium.Chromium.*`` folders each session leaves behind are removed when it closes;
`view_of_official` / `official_action` adapt the oracle's plans (`miniwob_harness.oracle`)
to its observations and actions; `run_ours` / `run_official` run a task's plan over seeds on
either env and return one `EpisodeResult` per seed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from devicerl.envs.browser.launcher import find_chromium
from devicerl.errors import ConfigError
from miniwob_harness.oracle import (
    PLANS,
    Click,
    Enter,
    Move,
    Node,
    Type,
    View,
    Wait,
    view_of,
)
from miniwob_harness.oracle import to_action as ours_action

_ENV_LOCK = threading.Lock()


def _chromedriver() -> str:
    path = os.environ.get("MINIWOB_CHROMEDRIVER") or shutil.which("chromedriver")
    if not path:
        raise ConfigError("the official miniwob env needs chromedriver (apt-get install "
                          "chromium-driver) or MINIWOB_CHROMEDRIVER")  # fmt: skip
    return path


@contextlib.contextmanager
def official_env(task: str, **kwargs: Any) -> Iterator[Any]:
    """The official gymnasium env for ``task`` (``click-test`` or ``miniwob/click-test``);
    closes it and removes its temp folders on exit."""
    import gymnasium as gym
    import miniwob

    gym.register_envs(miniwob)
    name = task.split("/", 1)[-1]
    tmp = tempfile.mkdtemp(prefix="devicerl-official-")
    env = None
    try:
        with _ENV_LOCK:  # the env reads these variables while it starts ChromeDriver
            saved = {k: os.environ.get(k) for k in ("MINIWOB_CHROME_BINARY",
                                                    "MINIWOB_CHROMEDRIVER", "TMPDIR")}  # fmt: skip
            os.environ["MINIWOB_CHROME_BINARY"] = os.environ.get(
                "MINIWOB_CHROME_BINARY"
            ) or find_chromium(None)
            os.environ["MINIWOB_CHROMEDRIVER"] = _chromedriver()
            os.environ["TMPDIR"] = tmp
            try:
                env = gym.make(f"miniwob/{name}-v1", **kwargs)
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        yield env
    finally:
        if env is not None:
            with contextlib.suppress(Exception):
                env.close()
        shutil.rmtree(tmp, ignore_errors=True)


def official_processes(env: Any) -> list[int]:
    """Pids of the env's ChromeDriver and its Chromium processes (for memory accounting)."""
    import psutil

    try:
        service = env.unwrapped.instance.driver.service
        root = psutil.Process(service.process.pid)
        return [root.pid, *(c.pid for c in root.children(recursive=True))]
    except (AttributeError, psutil.Error):
        return []


def view_of_official(obs: dict[str, Any], memory: dict[str, Any]) -> View:
    """A `View` of an official observation."""
    nodes = []
    for e in obs["dom_elements"]:
        tag, _, kind = str(e["tag"]).lower().partition("_")
        left, top = float(e["left"][0]), float(e["top"][0])
        value = str(e["value"])
        if kind in ("checkbox", "radio"):
            value = "true" if value == "True" else "false"
        nodes.append(
            Node(
                tag=tag,
                text=str(e["text"]),
                value=value,
                html_id=str(e["id"]),
                classes=str(e["classes"]),
                box=(left, top, left + float(e["width"][0]), top + float(e["height"][0])),
                type=kind,
                focused=bool(e["flags"][0]),
            )
        )
    return View(str(obs["utterance"]), {str(k): str(v) for k, v in obs["fields"]}, nodes, memory)


def official_action(env: Any, move: Move | None) -> Any:
    """A plan's move as an official action (None or `Wait` -> the NONE action)."""
    from miniwob.action import ActionTypes

    unwrapped = env.unwrapped
    if isinstance(move, Click):
        return unwrapped.create_action(ActionTypes.CLICK_COORDS, coords=[move.x, move.y])
    if isinstance(move, Type):
        return unwrapped.create_action(ActionTypes.TYPE_TEXT, text=move.text)
    if isinstance(move, Enter):
        keys = list(unwrapped.action_space_config.allowed_keys)
        return unwrapped.create_action(ActionTypes.PRESS_KEY, key=keys.index("<Enter>"))
    return unwrapped.create_action(ActionTypes.NONE)


@dataclass
class EpisodeResult:
    """One oracle episode: success (raw reward > 0), steps taken and wall time."""

    seed: int
    success: bool
    raw_reward: float
    steps: int
    seconds: float


def _plan_for(task: str):
    name = task.split("/", 1)[-1]
    if name not in PLANS:
        raise ConfigError(f"no oracle plan for MiniWoB task {name!r}")
    return PLANS[name]


def run_ours(env: Any, task: str, seeds: Sequence[int], max_steps: int) -> list[EpisodeResult]:
    """Run ``task``'s plan on our device ``env`` (a `BrowserEnv`) once per seed."""
    plan = _plan_for(task)
    out = []
    for seed in seeds:
        t0 = time.perf_counter()
        obs = env.reset(f"miniwob/{task.split('/', 1)[-1]}", seed=seed)
        memory: dict[str, Any] = {}
        info: dict[str, Any] = {}
        steps = 0
        while steps < max_steps:
            move = plan(view_of(obs, memory))
            if move is None:
                break
            if isinstance(move, Wait):
                time.sleep(move.seconds)
            result = env.step(ours_action(move, obs.screen_size))
            steps += 1
            obs, info = result.observation, result.info
            if result.done:
                break
        raw = float(info.get("raw_reward", 0.0))
        out.append(EpisodeResult(seed, raw > 0, raw, steps, time.perf_counter() - t0))
    return out


def run_official(task: str, seeds: Sequence[int], max_steps: int) -> list[EpisodeResult]:
    """Run ``task``'s plan on a fresh official env once per seed."""
    plan = _plan_for(task)
    out = []
    with official_env(task) as env:
        for seed in seeds:
            t0 = time.perf_counter()
            obs, info = env.reset(seed=seed)
            memory: dict[str, Any] = {}
            steps, raw = 0, 0.0
            while steps < max_steps:
                move = plan(view_of_official(obs, memory))
                if move is None:
                    break
                if isinstance(move, Wait):
                    time.sleep(move.seconds)
                obs, _, terminated, truncated, info = env.step(official_action(env, move))
                steps += 1
                if terminated or truncated:
                    raw = float(info.get("raw_reward", 0.0))
                    break
            out.append(EpisodeResult(seed, raw > 0, raw, steps, time.perf_counter() - t0))
    return out
