"""Pool throughput under faults, relative to the same pool without faults (one run, side by side).

Faults: 10 % of the workers are SIGKILLed per minute (a Poisson process picking a random live
worker) and 1 % of steps hang forever (the synthetic device's ``hang`` fault); the pool must
time the hung steps out (``--step-timeout``), kill and restart the workers and keep going.
Devices use the ``uniform`` latency profile of pool_throughput.py (50-300 ms). The faulty and
the fault-free pool run at the same time, so both see the same machine load.

Reported: env-steps/s (every step executed, as in pool_throughput.py) and useful steps/s
(steps of complete episodes only: a truncated episode's steps are lost work), each relative to
the fault-free run. Goal: >= 0.8.

Usage: python benchmarks/pool_faults.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pool_throughput import DEVICE, device_options, ideal_rate, run_pool, write_report

from devicerl.envs import EnvSpec
from devicerl.envs.synthetic import Faults
from devicerl.pool import EnvPool, SupervisorConfig


class Killer:
    """SIGKILLs a random live worker at Poisson times (``per_minute`` kills per minute)."""

    def __init__(self, per_minute: float, seed: int = 0) -> None:
        self.rate = per_minute / 60.0
        self.rng = random.Random(seed)
        self.next = time.monotonic() + self.rng.expovariate(self.rate)
        self.kills = 0

    def __call__(self, pool: EnvPool) -> None:
        if time.monotonic() < self.next:
            return
        self.next += self.rng.expovariate(self.rate)
        pids = list(pool.worker_pids().values())
        if pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.rng.choice(pids), signal.SIGKILL)
                self.kills += 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="short runs (under a minute)")
    p.add_argument("--json", type=Path, help="write all numbers to this file")
    p.add_argument("--n", type=int, default=32, help="devices")
    p.add_argument("--duration", type=float, help="measured seconds per run")
    p.add_argument("--step-timeout", type=float, default=1.0, help="pool step timeout (s)")
    p.add_argument("--kill-rate", type=float, default=0.10, help="workers killed per minute")
    p.add_argument("--hang-rate", type=float, default=0.01, help="fraction of steps that hang")
    args = p.parse_args(argv)
    duration = args.duration or (20.0 if args.quick else 120.0)
    warmup = 2.0
    supervision = SupervisorConfig(
        step_timeout=args.step_timeout,
        max_restarts=None,  # every device hangs about every 20 s here: never retire
        max_restarts_per_minute=10 * args.n,
    )
    t_start = time.perf_counter()

    def specs(faults: dict | None) -> list[EnvSpec]:
        return [
            EnvSpec(DEVICE, replace(device_options("uniform", i), faults=Faults(**(faults or {}))))
            for i in range(args.n)
        ]

    # Both pools run at the same time (one thread each), so they see the same machine load.
    killer = Killer(args.kill_rate * args.n)
    runs = {
        "clean": (specs(None), None),
        "faulty": (specs({"hang": args.hang_rate, "hang_s": 3600.0}), killer),
    }
    results: dict[str, dict] = {}

    def go(name: str) -> None:
        results[name] = run_pool(runs[name][0], duration, warmup, supervision, runs[name][1])

    threads = [threading.Thread(target=go, args=(name,)) for name in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    clean, faulty = results["clean"], results["faulty"]
    ratio = faulty["steps_per_s"] / clean["steps_per_s"]
    useful = faulty["useful_steps_per_s"] / clean["useful_steps_per_s"]
    fp = faulty["pool"]
    print(
        f"N={args.n} uniform, {duration:.0f}s each: fault-free {clean['steps_per_s']:.1f} "
        f"steps/s (ideal {ideal_rate('uniform', args.n):.1f}); faulty "
        f"{faulty['steps_per_s']:.1f} steps/s with {killer.kills} kills, "
        f"{fp.get('timeouts', 0)} step timeouts, {fp.get('crashes', 0)} crashes seen, "
        f"{fp['restarts']} restarts, {fp.get('truncated', 0)} truncated episodes"
    )
    print(
        f"throughput vs fault-free: {ratio:.3f} (env-steps/s), {useful:.3f} (steps of complete "
        f"episodes: {faulty['useful_steps_per_s']:.1f} vs {clean['useful_steps_per_s']:.1f})"
    )
    if args.json:
        report = {
            "n": args.n,
            "duration_s": duration,
            "step_timeout_s": args.step_timeout,
            "kill_rate_per_min": args.kill_rate,
            "hang_rate": args.hang_rate,
            "fault_free": clean,
            "faulty": {**faulty, "kills": killer.kills},
            "ratio": ratio,
            "useful_ratio": useful,
        }
        write_report(args.json, "pool_faults", args.quick, report, t_start)
    print(f"RESULT fault_throughput_ratio={ratio:.3f} fault_useful_ratio={useful:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
