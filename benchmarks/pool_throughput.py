"""Env-steps/s of the async pool vs DigiRL-style lockstep, gymnasium AsyncVectorEnv, the ideal.

Synthetic ``steps`` devices (episodes of 1-10 steps, uniform) with two latency profiles:
``uniform`` (steps and resets 50-300 ms) and ``heavy`` (lognormal, median 20 ms, sigma 1.0;
2 % of resets 20x slower). For N devices, side by side in one run:

(a) ``EnvPool`` with subprocess workers, driven by ``recv(min_ready=1)`` / ``send``;
(b) DigiRL-style lockstep: a batch of N episodes is reset together, every step waits for
    every live device (a thread per device, as DigiRL's batched env does), and the next batch
    starts only when every episode of the batch ended;
(c) gymnasium ``AsyncVectorEnv(shared_memory=True)`` over ``GymDeviceEnv`` (each vector step
    waits for all N; both autoreset modes are run and the faster one is reported);
(d) the ideal: every device busy all the time, per device E[steps per episode] /
    E[time per episode] = 5.5 / (5.5 * mean step latency + mean reset latency), summed over
    devices. The empirical ideal uses the latencies actually drawn during (a).

Screenshot transport: zero-latency devices emitting 540x1170x3 frames, (a) vs (c). The
gymnasium adapter's per-step frame copy is removed for (c), which then makes the same number
of copies as the pool (worker -> shared memory -> caller). In the latency runs devices render
no pixels (drawing synthetic screens would only burn the CPU the compared systems need).

Usage: python benchmarks/pool_throughput.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from devicerl.actions import AITW_TYPES, Action, ActionType
from devicerl.envs import EnvSpec
from devicerl.envs.synthetic import Latency, SyntheticEnv, SyntheticOptions
from devicerl.pool import EnvPool, Ready, SupervisorConfig
from devicerl.records import Observation
from devicerl.tasks import Task, TaskSampler
from devicerl.tasks.gym_adapter import GymDeviceEnv

TASKS = [Task("synthetic/steps", max_steps=10, env="synthetic")]
MEAN_LEN = 5.5  # episode length is uniform in 1..10
PROFILES: dict[str, dict[str, Latency]] = {
    "uniform": {
        "step_latency": Latency("uniform", low=0.05, high=0.3),
        "reset_latency": Latency("uniform", low=0.05, high=0.3),
    },
    "heavy": {
        "step_latency": Latency("lognormal", median=0.02, sigma=1.0),
        "reset_latency": Latency(
            "lognormal", median=0.02, sigma=1.0, slow_prob=0.02, slow_factor=20.0
        ),
    },
}
ACTION = Action.tap(0.5, 0.5)


#: The device every system runs: the synthetic suite's ``steps`` task.
DEVICE = "synthetic/steps"


def device_options(profile: str, i: int, screen: tuple[int, int] | None = None) -> SyntheticOptions:
    """The same device (latencies seeded by its index) for every system. Without ``screen``
    it renders no pixels: a real device spends its time elsewhere (a phone, an emulator), so
    the host CPU should go to the systems compared, not to drawing synthetic screens."""
    latencies = PROFILES.get(profile, {})
    return SyntheticOptions(
        screen=screen or (32, 32), render=screen is not None, seed=1000 + i, **latencies
    )


def ideal_rate(profile: str, n: int) -> float:
    """(d): every device always busy; per device E[L] / (E[L] * E[step] + E[reset])."""
    p = PROFILES[profile]
    per_episode = MEAN_LEN * p["step_latency"].mean + p["reset_latency"].mean
    return n * MEAN_LEN / per_episode


class _Busy:
    """Per device: steps and the latencies drawn for every command (step or reset) the device
    ran, read from what `recv` returns. Counting every command that *started* during the run
    (in-flight ones are drained at the end) avoids the bias of keeping only finished ones,
    which under-samples long commands."""

    def __init__(self, n: int) -> None:
        self.steps = [0] * n
        self.busy = [0.0] * n

    def record(self, r: Ready, stopped_at: float | None = None) -> None:
        """``stopped_at`` (wall time) during the drain: a reset that a step finishing after it
        triggered started after the run and is left out."""
        if r.observation is None:
            return
        t = r.trajectory
        late_reset = stopped_at is not None and t is not None and t.ended_at > stopped_at
        if r.first and not late_reset:
            self.busy[r.env_id] += r.observation.extras.get("reset_latency_s", 0.0)
        info = r.result.info if r.result is not None else {}
        if "latency_s" in info:  # the step that led here (for a new episode: its last one)
            self.steps[r.env_id] += 1
            self.busy[r.env_id] += info["latency_s"]

    def ideal(self) -> float:
        """Empirical ideal: N x all steps / all busy time (the devices are alike, so pooling
        them avoids the small-sample bias of per-device ratios)."""
        return len(self.steps) * sum(self.steps) / max(sum(self.busy), 1e-9)


# -- (a) the pool ----------------------------------------------------------------------------
class PoolDriver:
    """A subprocess pool driven with a constant action, measured in windows (`run`)."""

    def __init__(
        self,
        specs: list[EnvSpec],
        supervision: SupervisorConfig | None = None,
        on_round: Callable[[EnvPool], None] | None = None,
    ) -> None:
        self.pool = EnvPool(specs, tasks=TaskSampler(TASKS, seed=0), supervision=supervision)
        self.on_round = on_round
        self.busy = _Busy(len(specs))
        self.useful = 0  # steps of complete episodes that ended inside measured windows

    def run(self, seconds: float, measure: bool = True) -> tuple[int, float]:
        """Step for ``seconds``; returns (steps completed, seconds elapsed)."""
        pool, t0, wall0 = self.pool, time.perf_counter(), time.time()
        steps0, end = pool.counters["steps"], t0 + seconds
        while (now := time.perf_counter()) < end:
            ids = []
            for r in pool.recv(min_ready=1, timeout=end - now):
                self.busy.record(r)
                if r.observation is not None:
                    ids.append(r.env_id)
                t = r.trajectory
                if measure and t is not None and not t.is_truncated and t.ended_at >= wall0:
                    self.useful += len(t.steps)
            pool.send([ACTION] * len(ids), ids)
            if self.on_round is not None:
                self.on_round(pool)
        return pool.counters["steps"] - steps0, time.perf_counter() - t0

    def drain(self, timeout: float = 10.0) -> None:
        """Stop acting and collect what is in flight, for the empirical ideal."""
        stopped_at, end = time.time(), time.perf_counter() + timeout
        while self.pool.busy and (left := end - time.perf_counter()) > 0:
            for r in self.pool.recv(min_ready=1, timeout=left):
                self.busy.record(r, stopped_at)

    def close(self) -> dict:
        self.pool.close()
        stats = self.pool.stats()
        return {k: v for k, v in stats.items() if k != "states"}


def run_pool(
    specs: list[EnvSpec],
    duration: float,
    warmup: float,
    supervision: SupervisorConfig | None = None,
    on_round: Callable[[EnvPool], None] | None = None,
) -> dict:
    """Warm up, then measure one window. ``useful_steps_per_s`` counts only steps of complete
    (not truncated) episodes."""
    driver = PoolDriver(specs, supervision, on_round)
    try:
        driver.run(warmup, measure=False)
        steps, elapsed = driver.run(duration)
        driver.drain()
    finally:
        counters = driver.close()
    return {
        "steps_per_s": steps / elapsed,
        "useful_steps_per_s": driver.useful / elapsed,
        "steps": steps,
        "seconds": elapsed,
        "empirical_ideal": driver.busy.ideal(),
        "pool": counters,
    }


def bench_pool(profile: str, n: int, duration: float, warmup: float, screen=None) -> dict:
    specs = [EnvSpec(DEVICE, device_options(profile, i, screen)) for i in range(n)]
    return run_pool(specs, duration, warmup)


# -- (b) DigiRL-style lockstep batches --------------------------------------------------------
def bench_lockstep(profile: str, n: int, duration: float) -> dict:
    envs = [SyntheticEnv(DEVICE, device_options(profile, i)) for i in range(n)]
    sampler = TaskSampler(TASKS, seed=0)
    steps, batches = 0, 0
    with ThreadPoolExecutor(max_workers=n) as threads:
        t0 = time.perf_counter()
        while batches == 0 or time.perf_counter() - t0 < duration:
            instances = [sampler.next() for _ in range(n)]
            list(threads.map(lambda e, i: e.reset(i.task, i.seed), envs, instances))
            live = list(range(n))
            while live:
                results = list(threads.map(lambda i: envs[i].step(ACTION), live))
                steps += len(live)
                live = [i for i, r in zip(live, results) if not r.done]
            batches += 1
        elapsed = time.perf_counter() - t0
    for e in envs:
        e.close()
    return {"steps_per_s": steps / elapsed, "steps": steps, "seconds": elapsed, "batches": batches}


# -- (c) gymnasium AsyncVectorEnv -------------------------------------------------------------
class LeanGymDeviceEnv(GymDeviceEnv):
    """`GymDeviceEnv` without its per-step frame copy (AsyncVectorEnv copies it anyway)."""

    def _to_gym(self, obs: Observation) -> dict[str, Any]:
        shot = obs.screenshot
        if shot is None:
            shot = np.zeros((obs.screen_size[1], obs.screen_size[0], 3), np.uint8)
        return {"screenshot": shot, "instruction": obs.instruction, "step": int(obs.step)}


class _GymFactory:
    """Picklable env factory for AsyncVectorEnv workers."""

    def __init__(self, options: SyntheticOptions) -> None:
        self.options = options

    def __call__(self) -> GymDeviceEnv:
        return LeanGymDeviceEnv(SyntheticEnv(DEVICE, self.options), TASKS)


class GymDriver:
    """gymnasium ``AsyncVectorEnv`` over `LeanGymDeviceEnv`, measured in windows (`run`)."""

    def __init__(self, profile: str, n: int, mode: str, screen=None) -> None:
        from gymnasium.vector import AsyncVectorEnv, AutoresetMode

        fns = [_GymFactory(device_options(profile, i, screen)) for i in range(n)]
        self.n, self.mode = n, mode
        self.venv = AsyncVectorEnv(fns, shared_memory=True, autoreset_mode=AutoresetMode(mode))
        kind = AITW_TYPES.index(ActionType.DUAL_POINT)
        self.actions = {
            "action_type": np.full(n, kind),
            "touch": np.full((n, 2), 0.5, np.float32),
            "lift": np.full((n, 2), 0.5, np.float32),
            "text": ("",) * n,
            "duration": np.zeros((n, 1), np.float32),
        }
        self.venv.reset(seed=0)
        self.resetting = np.zeros(n, bool)

    def run(self, seconds: float, measure: bool = True) -> tuple[int, float]:
        """Step for ``seconds``; returns (real env steps, seconds elapsed). In NextStep mode a
        vector step that resets a finished env is not an env step for that env."""
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            _obs, _r, term, trunc, _info = self.venv.step(self.actions)
            steps += self.n if self.mode == "SameStep" else int(self.n - self.resetting.sum())
            self.resetting = term | trunc
        return steps, time.perf_counter() - t0

    def close(self) -> None:
        self.venv.close()


def bench_gym(profile: str, n: int, duration: float, warmup: float, mode: str, screen=None) -> dict:
    driver = GymDriver(profile, n, mode, screen)
    try:
        driver.run(warmup, measure=False)
        steps, elapsed = driver.run(duration)
    finally:
        driver.close()
    return {"steps_per_s": steps / elapsed, "steps": steps, "seconds": elapsed, "mode": mode}


def best_gym(profile, n, duration, warmup, modes, screen=None) -> dict:
    runs = {m: bench_gym(profile, n, duration, warmup, m, screen) for m in modes}
    best = max(runs.values(), key=lambda r: r["steps_per_s"])
    return {**best, "by_mode": {m: r["steps_per_s"] for m, r in runs.items()}}


# -- the whole comparison ---------------------------------------------------------------------
def compare(profile: str, n: int, args: argparse.Namespace) -> dict:
    a = bench_pool(profile, n, args.duration, args.warmup)
    b = bench_lockstep(profile, n, args.duration)
    c = best_gym(profile, n, args.duration, args.warmup, args.gym_modes)
    d = ideal_rate(profile, n)
    row = {
        "profile": profile,
        "n": n,
        "pool": a,
        "lockstep": b,
        "gymnasium": c,
        "ideal": d,
        "efficiency": a["steps_per_s"] / d,
        "efficiency_empirical": a["steps_per_s"] / a["empirical_ideal"],
        "vs_lockstep": a["steps_per_s"] / b["steps_per_s"],
        "vs_gymnasium": a["steps_per_s"] / c["steps_per_s"],
    }
    print(
        f"{profile:>8} N={n:<3} pool {a['steps_per_s']:8.1f}  lockstep {b['steps_per_s']:7.1f}  "
        f"gym {c['steps_per_s']:7.1f} ({c['mode']})  ideal {d:8.1f} "
        f"(empirical {a['empirical_ideal']:7.1f})  eff {row['efficiency']:.3f} "
        f"(emp {row['efficiency_empirical']:.3f})  x lockstep {row['vs_lockstep']:5.2f}  "
        f"x gym {row['vs_gymnasium']:5.2f}  (load {os.getloadavg()[0]:.1f})",
        flush=True,
    )
    row["load_avg_1min"] = os.getloadavg()[0]
    return row


def transport(n: int, args: argparse.Namespace) -> dict:
    """Frames/s of the pool vs gymnasium (both autoreset modes), all alive at once and measured
    in alternating windows, so machine load changes hit every system alike."""
    screen = (540, 1170)
    specs = [EnvSpec(DEVICE, device_options("zero", i, screen)) for i in range(n)]
    drivers: dict[str, Any] = {"pool": PoolDriver(specs)}
    try:
        for mode in args.gym_modes:
            drivers[mode] = GymDriver("zero", n, mode, screen)
        for d in drivers.values():
            d.run(args.warmup, measure=False)
        totals = {k: [0, 0.0] for k in drivers}
        for _ in range(args.rounds):
            for k, d in drivers.items():
                steps, elapsed = d.run(args.duration / args.rounds)
                totals[k][0] += steps
                totals[k][1] += elapsed
    finally:
        for d in drivers.values():
            d.close()
    rates = {k: steps / elapsed for k, (steps, elapsed) in totals.items()}
    best = max(args.gym_modes, key=lambda m: rates[m])
    ratio = rates["pool"] / rates[best]
    print(
        f"transport 540x1170x3 N={n}: pool {rates['pool']:.1f} frames/s, gymnasium "
        f"{rates[best]:.1f} frames/s ({best}), ratio {ratio:.2f}",
        flush=True,
    )
    return {"n": n, "frames_per_s": rates, "gymnasium_mode": best, "ratio": ratio}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="short runs (under a minute)")
    p.add_argument("--json", type=Path, help="write all numbers to this file")
    p.add_argument("--sizes", type=int, nargs="+", help="device counts (default 8 32 64)")
    p.add_argument("--profiles", nargs="+", default=list(PROFILES), choices=list(PROFILES))
    p.add_argument("--duration", type=float, help="measured seconds per run")
    p.add_argument("--transport-n", type=int, default=8, help="devices in the transport run")
    args = p.parse_args(argv)
    args.sizes = args.sizes or ([64] if args.quick else [8, 32, 64])
    args.duration = args.duration or (2.0 if args.quick else 10.0)
    args.warmup = 0.5 if args.quick else 2.0
    args.gym_modes = ["NextStep", "SameStep"]
    args.rounds = 4 if args.quick else 8
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    rows = [compare(prof, n, args) for prof in args.profiles for n in args.sizes]
    trans = transport(args.transport_n, args)
    by = {(r["profile"], r["n"]): r for r in rows}
    big = max(args.sizes)
    heavy, uniform = by.get(("heavy", big)), by.get(("uniform", big))
    summary = {
        f"efficiency_heavy{big}": heavy["efficiency"] if heavy else math.nan,
        f"vs_lockstep_heavy{big}": heavy["vs_lockstep"] if heavy else math.nan,
        f"vs_gymnasium_heavy{big}": heavy["vs_gymnasium"] if heavy else math.nan,
        f"vs_gymnasium_uniform{big}": uniform["vs_gymnasium"] if uniform else math.nan,
        "transport_vs_gymnasium": trans["ratio"],
    }
    if args.json:
        report = {"duration_s": args.duration, "rows": rows, "transport": trans, "summary": summary}
        write_report(args.json, "pool_throughput", args.quick, report, t0)
    print(f"total {time.perf_counter() - t0:.1f}s")
    print("RESULT " + " ".join(f"{k}={v:.3f}" for k, v in summary.items()))
    return 0


def write_report(path: Path, name: str, quick: bool, report: dict, started: float) -> None:
    """Write a benchmark's numbers with what is needed to compare runs."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    head = {
        "benchmark": name,
        "quick": quick,
        "machine": {"cpus": cpus, "python": platform.python_version()},
        "load_avg_1min_at_end": os.getloadavg()[0],
        "wall_s": time.perf_counter() - started,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**head, **report}, indent=2, default=str))


if __name__ == "__main__":
    sys.exit(main())
