"""Env-steps/s of rollout groups on 1, 2 and 4 Ray nodes, vs DigiRL's barrier; node loss.

A real multi-node Ray cluster on this machine (`LocalCluster`: a head and 4 worker nodes of
equal size, each with one rollout-group slot). Devices are synthetic with an Android-like
latency profile, every duration divided by ``--scale``: a step takes ~1-3 s (lognormal, median
1.7 s, sigma 0.25), a reset 10-60 s (uniform), and 2 % of resets are 5x slower (an emulator
that reboots: 50-300 s). Episodes last 1-10 steps. Devices render no pixels, so the CPU is not
what limits throughput. A simulated learner takes ``--learn-s`` (scaled) per iteration of K
episodes.

- ours: `RolloutFleet` with one group per node (``--devices`` devices each, subprocess workers,
  random policy); the learner consumes while the devices keep stepping. Throughput with 1, 2
  and 4 nodes is measured on one fleet of 4 groups, the groups of unused nodes paused.
- barrier: DigiRL's multi-machine rhythm on the same nodes and the same number of devices: on
  each host a batch of episodes is reset together and stepped in lockstep until all ended (a
  thread per device, as DigiRL's batched env); the learner waits for every host's batch, then
  learns while every device idles. Measured first, while the groups are paused.
- node loss: with 4 groups running, one worker node is removed; throughput after it (the lost
  group cannot be placed again: no free slot) is compared with 3/4 of the throughput before.
  The window starts as soon as the node is gone, while Ray and the fleet notice the loss
  (Ray's default failure detection, ~15-30 s), and lasts until both the window passed and the
  fleet closed the lost group: the run must keep its pace through the detection.
  Then a node joins: the waiting group starts there (``join_gain``: throughput after / before;
  not part of the RESULT line, and left out by ``--quick``, ``--join`` puts it back).
  Every group appends the id of each episode it shipped to a ledger once the fleet acknowledged
  the reply; ``lost_completed`` counts complete episodes there that the learner never got
  (neither consumed nor handed back unconsumed when the fleet stopped); duplicates apart.
  An episode that ended on the removed node in the moment before it went, whose reply never
  left the node, is recorded truncated ``node_lost`` (``node_lost_episodes``).

The JSON records how long each phase took (``phases_s``: Ray start, groups start, ...) and
the machine's load average before and after (``load_before``, ``load_after``): the machine
this runs on may be shared, and ratios are only comparable within one run.

Usage: python benchmarks/cluster_scaling.py [--quick] [--json PATH]
Last line: RESULT scaling_4nodes=... vs_barrier=... node_loss_kept=... lost_completed=...
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from devicerl.actions import Action
from devicerl.config import load_config
from devicerl.runtime.cluster.fleet import POLL_S, RolloutFleet
from devicerl.runtime.cluster.local import GROUP_RESOURCE, LocalCluster
from devicerl.runtime.setup.config import TrainConfig

NODES = 4


def latency_profile(scale: float) -> dict[str, Any]:
    """The synthetic device's options: Android-like latencies divided by ``scale``."""
    return {
        "render": False,
        "step_latency": {"kind": "lognormal", "median": 1.7 / scale, "sigma": 0.25},
        "reset_latency": {
            "kind": "uniform",
            "low": 10.0 / scale,
            "high": 60.0 / scale,
            "slow_prob": 0.02,
            "slow_factor": 5.0,
        },
    }


def ideal_rate(scale: float, devices: int) -> float:
    """Env-steps/s of ``devices`` always-busy devices: E[steps] / E[time] per episode."""
    from devicerl.envs.synthetic import Latency

    p = latency_profile(scale)
    step, reset = Latency.parse(p["step_latency"]).mean, Latency.parse(p["reset_latency"]).mean
    return devices * 5.5 / (5.5 * step + reset)


def fleet_config(args: argparse.Namespace) -> TrainConfig:
    profile = json.dumps(latency_profile(args.scale))
    return load_config(
        TrainConfig,
        None,
        [
            "algo=none",
            "agent.kind=random",
            "env.name=synthetic/steps",
            "env.worker=subprocess",
            f"env.num_envs={args.devices}",
            f"env.options={profile}",
            "tasks.train=synthetic/steps",
            f"trajectories_per_iter={args.devices * NODES}",
            f"rollouts.groups={NODES}",
            f"rollouts.resources={{CPU: 0.25, {GROUP_RESOURCE}: 1}}",
        ],
    )


class Learner:
    """The simulated learner of "ours": takes K episodes, learns for ``learn_s``, publishes a
    new version; counts what arrives (ids, steps) on the way."""

    def __init__(self, fleet: RolloutFleet, k: int, learn_s: float) -> None:
        self.fleet, self.k, self.learn_s = fleet, k, learn_s
        self.received: dict[str, str] = {}
        self.duplicates = 0
        self.version = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            got = 0
            while got < self.k and not self.stop.is_set():
                t = self.fleet.get(timeout=0.2)
                if t is None:
                    continue
                self.duplicates += t.episode_id in self.received
                self.received[t.episode_id] = t.end_reason.value if t.end_reason else "?"
                got += 1
            time.sleep(self.learn_s)
            self.version += 1
            self.fleet.publish({}, self.version)  # a version without weights


def env_steps(fleet: RolloutFleet) -> float:
    """Env steps the groups report (steps of lost groups stay counted)."""
    return fleet.stats.get("pool/env_steps", 0.0)


def measure(fleet: RolloutFleet, seconds: float, until=None) -> dict[str, float]:
    """Env-steps/s over ``seconds`` (and, with ``until``, at least until it returns True)."""
    s0, t0 = env_steps(fleet), time.perf_counter()
    if until is None:
        time.sleep(seconds)
    else:  # ``until`` is asked all along, so it can note when its condition came true
        while not until() or time.perf_counter() - t0 < seconds:
            assert time.perf_counter() - t0 < seconds + 120, "timed out"
            time.sleep(0.1)
    s1, t1 = env_steps(fleet), time.perf_counter()
    return {"steps": s1 - s0, "seconds": t1 - t0, "steps_per_s": (s1 - s0) / (t1 - t0)}


class Phases:
    """Wall time of each phase of the benchmark (where its minutes go)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.t = time.perf_counter()

    def done(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = round(now - self.t, 2)
        self.t = now
        print(f"  [{name}: {self.seconds[name]:.1f}s]", flush=True)


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def set_active(fleet: RolloutFleet, n: int) -> None:
    """Groups 0..n-1 collect, the others are paused (their devices idle)."""
    for index, actor in fleet.members().items():
        actor.throttle.remote(index >= n)


class BarrierHost:
    """One host of DigiRL's multi-machine rhythm: its devices play a batch in lockstep."""

    def __init__(self, devices: int, profile: dict[str, Any], seed: int) -> None:
        from devicerl.envs import make
        from devicerl.tasks import Task, TaskSampler

        self.envs = [make("synthetic", **profile) for _ in range(devices)]
        self.sampler = TaskSampler([Task("synthetic/steps")], seed=seed)
        self.threads = ThreadPoolExecutor(max_workers=devices)

    def round(self) -> int:
        action = Action.tap(0.5, 0.5)
        instances = [self.sampler.next() for _ in self.envs]
        list(self.threads.map(lambda e, i: e.reset(i.task, i.seed), self.envs, instances))
        live, steps = list(range(len(self.envs))), 0
        while live:
            results = list(self.threads.map(lambda i: self.envs[i].step(action), live))
            steps += len(live)
            live = [i for i, r in zip(live, results) if not r.done]
        return steps


def barrier_hosts(ray: Any, args: argparse.Namespace) -> tuple[list[Any], list[Any]]:
    """The barrier's hosts, one per node, and their warm-up round (process start-up) under
    way: it runs while the rollout groups start, and is not measured."""
    profile = latency_profile(args.scale)
    host = ray.remote(BarrierHost)
    hosts = [
        host.options(num_cpus=0.25, resources={f"node_{i}": 0.5}).remote(args.devices, profile, i)
        for i in range(NODES)
    ]
    return hosts, [h.round.remote() for h in hosts]


def bench_barrier(
    ray: Any, args: argparse.Namespace, seconds: float, hosts: list[Any], warm_up: list[Any]
) -> dict[str, float]:
    ray.get(warm_up)
    steps, rounds, t0 = 0, 0, time.perf_counter()
    while rounds < 5 or time.perf_counter() - t0 < seconds:  # a round is one straggler draw
        steps += sum(ray.get([h.round.remote() for h in hosts]))  # every host's batch
        time.sleep(args.learn_s / args.scale)  # then learn, every device idle
        rounds += 1
    elapsed = time.perf_counter() - t0
    for h in hosts:
        ray.kill(h)
    return {"steps": steps, "seconds": elapsed, "rounds": rounds, "steps_per_s": steps / elapsed}


def join(local: LocalCluster, fleet: RolloutFleet, settle: float, window: float) -> dict:
    """A node joins: the group waiting for a slot starts there; throughput after."""
    try:
        local.add_node("node_joined")
    except Exception as e:  # a raylet that cannot start on a saturated machine
        return {"error": f"{type(e).__name__}: {e}"}
    while None in fleet.placement().values():
        time.sleep(0.1)
    time.sleep(settle)
    return measure(fleet, window)


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True)
        return out.stdout.strip()
    except OSError:
        return "unknown"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="short windows (under 2 minutes)")
    p.add_argument("--scale", type=float, default=None, help="latencies divided by (20; 40)")
    p.add_argument("--devices", type=int, default=8, help="devices per node")
    p.add_argument("--window", type=float, default=None, help="seconds per measurement")
    p.add_argument("--learn-s", type=float, default=30.0, help="learner time per iteration")
    p.add_argument("--json", default=None, help="write results here")
    p.add_argument(
        "--join",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="measure a node joining after the loss (default: yes, no with --quick)",
    )
    args = p.parse_args()
    args.scale = args.scale or (40.0 if args.quick else 20.0)
    window = args.window or (8.0 if args.quick else 40.0)
    settle = 2 * 60.0 / args.scale  # twice the longest normal reset: bursts after a pause end
    t_start = time.perf_counter()
    load_before = load()
    print(f"load average before: {load_before}", flush=True)
    if load_before[0] > 4:
        print(f"note: load {load_before[0]:.1f} > 4: this machine is busy", flush=True)
    phases = Phases()
    ledger = Path(tempfile.mkdtemp(prefix="cluster-scaling-")) / "ledger.tsv"
    local = LocalCluster(nodes=NODES, cpus_per_node=1.0).start()
    import ray

    ray.init(address=local.address, log_to_driver=False)
    phases.done("ray_start")
    result: dict[str, Any] = {
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "commit": git_commit(),
        "machine": f"{platform.node()} {os.cpu_count()} CPUs",
        "load_before": load_before,
        "scale": args.scale,
        "devices_per_node": args.devices,
        "learn_s": args.learn_s,
        "window_s": window,
        "profile": latency_profile(args.scale),
    }
    cfg = fleet_config(args)
    hosts, warm_up = barrier_hosts(ray, args)
    # never throttled: the learner keeps up
    fleet = RolloutFleet(cfg, max_ahead=10**9, ledger=ledger).start()
    learner = Learner(fleet, cfg.trajectories_per_iter, args.learn_s / args.scale)
    try:
        while len(fleet.placement()) < NODES or None in fleet.placement().values():
            time.sleep(0.2)
        set_active(fleet, 0)  # first, the same 4 nodes run DigiRL's rhythm
        phases.done("groups_start")
        barrier = bench_barrier(ray, args, window, hosts, warm_up)
        print(f"barrier, {NODES} nodes: {barrier['steps_per_s']:.1f} env-steps/s", flush=True)
        result["barrier"] = barrier
        phases.done("barrier")
        learner.thread.start()
        ours = {}
        for n in (1, 2, NODES):
            set_active(fleet, n)
            time.sleep(settle)
            ours[n] = measure(fleet, window * (2 if n == 1 else 1))
            ours[n]["ideal"] = ideal_rate(args.scale, n * args.devices)
            print(
                f"ours, {n} node(s): {ours[n]['steps_per_s']:.1f} env-steps/s "
                f"(ideal {ours[n]['ideal']:.1f})",
                flush=True,
            )
            phases.done(f"ours_{n}")
        result["ours"] = ours
        before = ours[NODES]  # node loss: the 4 groups go on running
        victim = local.cluster.list_all_nodes()[-1]
        local.cluster.remove_node(victim, allow_graceful=False)
        removed = time.perf_counter()
        noticed: list[float] = []

        def lost_noticed() -> bool:
            if (
                not noticed
                and fleet.counters["node_lost_groups"] + fleet.counters["group_lost_groups"]
            ):
                noticed.append(time.perf_counter() - removed)
            return bool(noticed)

        # the lost group's last steps are counted once its last reply is in: start after it
        time.sleep(2 * POLL_S)
        after = measure(fleet, window, until=lost_noticed)
        after["noticed_after_s"] = noticed[0]
        print(
            f"node loss: {before['steps_per_s']:.1f} -> {after['steps_per_s']:.1f} env-steps/s "
            f"(noticed after {noticed[0]:.1f}s, window {after['seconds']:.1f}s)",
            flush=True,
        )
        result["node_loss"] = {"before": before, "after": after}
        phases.done("node_loss")
        measure_join = not args.quick if args.join is None else args.join
        joined = join(local, fleet, settle, window) if measure_join else {"error": "skipped"}
        if "steps_per_s" in joined:
            print(f"node joined: {joined['steps_per_s']:.1f} env-steps/s", flush=True)
        else:
            print(f"node joined: not measured ({joined['error']})", flush=True)
        result["node_joined"] = joined
        phases.done("node_join")
    finally:
        learner.stop.set()
        learner.thread.join(10)
        left = fleet.stop()  # takes the groups' last shipments; unconsumed ones come back
        ray.shutdown()
        local.shutdown()
        phases.done("shutdown")
    shipped = [line.split("\t") for line in ledger.read_text().splitlines() if line]
    complete = {r[0] for r in shipped if r[1] != "truncated"}
    got = set(learner.received) | {t.episode_id for t in left}
    lost_completed = len(complete - got)  # reached the fleet complete, never the learner
    node_lost = int(fleet.counters["node_lost_episodes"])
    scaling = ours[NODES]["steps_per_s"] / (NODES * ours[1]["steps_per_s"])
    vs_barrier = ours[NODES]["steps_per_s"] / barrier["steps_per_s"]
    kept = after["steps_per_s"] / (0.75 * before["steps_per_s"])
    result.update(
        join_gain=joined["steps_per_s"] / after["steps_per_s"] if "error" not in joined else None,
        load_after=load(),
        phases_s=phases.seconds,
        scaling_4nodes=scaling,
        vs_barrier=vs_barrier,
        node_loss_kept=kept,
        lost_completed=lost_completed,
        duplicates=learner.duplicates + int(fleet.counters["duplicates"]),
        node_lost_episodes=node_lost,
        shipped_complete=len(complete),
        fleet_counters=dict(fleet.counters),
        total_s=time.perf_counter() - t_start,
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    print(
        f"total {result['total_s']:.0f}s, latencies / {args.scale:g}; load average before "
        f"{load_before}, after {result['load_after']}"
        + (" (busy machine: load > 4)" if max(load_before[0], result["load_after"][0]) > 4 else "")
    )
    print(
        f"RESULT scaling_4nodes={scaling:.3f} vs_barrier={vs_barrier:.2f} "
        f"node_loss_kept={kept:.3f} lost_completed={lost_completed}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
