"""The training loop against the fleet: env steps/s and episodes/s of the raw devices, of
collection through the pool and the collector with the agent (weights fixed), and of training
(online, the learner running), side by side on the same devices and tasks.

- ``raw``: N devices of the run's device spec, each stepped from its own thread in this process
  (as `browser_throughput.py` drives them), random taps, tasks drawn at random from the suite;
- ``collect``: the same N devices in the pool's workers (the run's ``env.worker``), the
  collector batching the ready devices' observations into the agent (the setup's agent, fixed
  weights);
- ``train``: the setup trained online (`devicerl.runtime.loop.trainer.Trainer`), collection
  overlapping the learner;
- ``eval``: `devicerl eval` of the setup's agent (weights fixed, greedy) on the same devices: the
  trainer in eval mode in a fresh run folder, ``--eval-episodes`` seeds of each of the suite's
  tasks in order, timed from the start of the run to its end (devices started, pages opened,
  episodes stored, as a user waits for it), with the same time shares plus ``start`` (until
  the first episode began) and its rate after the start (``episodes_per_s_after_start``);
  collection and evaluation both give their ``steps_per_episode`` (a greedy policy's episodes
  need not be as long as its sampled ones: with ``agent.kind=random`` both play one policy);
- ``fleet-eval``: the same evaluation twice, attached to a warm fleet of the same devices
  (`devicerl.pool.workers.fleet`, as ``devicerl fleet up`` then ``devicerl eval
  env.worker=fleet``): the fleet's start (devices launched, every task's page opened on each)
  comes before the clock, as collection's warm-up does; the second evaluation shows the
  devices still warm after a run;
- ``learner``: the setup's learner alone (offline, no devices) on the episodes the training part
  stored: its seconds per iteration, and the episodes/s it could consume, the most training can
  reach however well acting and learning overlap.

Each part first warms up (every device opens every task's page once), then is measured for
``--seconds``. For collection and training the time of each part of the loop is reported as a
share of the devices' (or the wall's) time: device step, reset, inference, learner, the rest
(transport, featurization outside the agent, the collector's own work). Goals (issue): collect /
raw >= 0.5 and train / collect >= 0.8 in episodes/s, for the DOM agent and with pixels, and
eval / raw at least collect / raw.

    python benchmarks/loop_throughput.py --devices 3 --seconds 60 [--pixels]

The last line is ``RESULT collect_vs_raw=X train_vs_collect=Y pixels=P`` (episodes/s ratios);
the lines before it, ``learner_vs_collect`` (the learner's own rate over collection's) and
``eval_vs_raw`` / ``eval_vs_collect`` (the evaluation's rate over the raw devices' and
collection's) and ``fleet_eval_vs_collect`` (each fleet evaluation's), when those parts ran.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from devicerl.actions import Action
from devicerl.config import config_source, load_config
from devicerl.data.store import TrajectoryStore
from devicerl.envs import EnvSpec, make
from devicerl.pool.workers.base import DeviceRecipe
from devicerl.pool.workers.fleet import Fleet
from devicerl.records import Trajectory
from devicerl.runtime.acting.collector import Collector
from devicerl.runtime.loop.factory import make_trainer
from devicerl.runtime.loop.observers import TrainerObserver
from devicerl.runtime.runs.folder import RunDir
from devicerl.runtime.runs.provenance import provenance
from devicerl.runtime.setup.config import TrainConfig
from devicerl.runtime.setup.learners import set_torch_threads
from devicerl.tasks import TaskSampler, resolve

SUITE = "miniwob-dev"
SETUP = "miniwob-digirl-tuned"
FLEET = "loop-throughput"
#: What ``--pixels`` changes: screenshots, and the agent's pixel features.
PIXELS = ("env.options.screenshot=true", "agent.small.inputs=[pixels]")


def setup_config(args: argparse.Namespace, folder: Path | None = None) -> TrainConfig:
    overrides = [
        f"tasks.train={SUITE}",
        f"env.num_envs={args.devices}",
        "env_steps=10000000",
        "eval.at_end=false",
        "logging.tensorboard=false",
        *(PIXELS if args.pixels else ()),
        *args.overrides,
    ]
    return load_config(TrainConfig, config_source(SETUP), overrides)


# -- raw devices ---------------------------------------------------------------------------------
def raw(cfg: TrainConfig, seconds: float) -> dict[str, float]:
    """N devices stepped from threads: random taps, random tasks, resets when episodes end."""
    tasks = [t.name for t in resolve(SUITE)]
    counts = [[0, 0] for _ in range(cfg.env.num_envs)]
    ready, go, stop = threading.Barrier(cfg.env.num_envs + 1), threading.Event(), threading.Event()

    def device(i: int) -> None:
        env = make(cfg.env.name, cfg.env.options)
        rng = random.Random(i)
        try:
            for t in tasks:  # warm-up: every task's page opened once
                env.reset(t, seed=rng.randrange(2**30))
            ready.wait()
            go.wait()
            while not stop.is_set():
                env.reset(rng.choice(tasks), seed=rng.randrange(2**30))
                counts[i][1] += 1
                done = False
                while not done and not stop.is_set():
                    done = env.step(
                        Action.tap(rng.uniform(0.02, 0.98), rng.uniform(0.25, 0.98))
                    ).done
                    counts[i][0] += 1
        finally:
            env.close()

    threads = [threading.Thread(target=device, args=(i,), daemon=True) for i in range(len(counts))]
    for t in threads:
        t.start()
    ready.wait()
    t0 = time.perf_counter()
    go.set()
    time.sleep(seconds)
    stop.set()
    dt = time.perf_counter() - t0
    for t in threads:
        t.join(60)
    steps, episodes = sum(c[0] for c in counts), sum(c[1] for c in counts)
    return {"steps_per_s": steps / dt, "episodes_per_s": episodes / dt}


# -- collection ----------------------------------------------------------------------------------
def collect(cfg: TrainConfig, seconds: float) -> dict[str, float]:
    """The pool and the collector with the setup's agent, weights fixed."""
    set_torch_threads()
    agent = cfg.agent.make()
    n_tasks = len(resolve(SUITE))
    sampler = TaskSampler(resolve(SUITE), seed=cfg.seed, seeds="train")
    with cfg.env.make_pool(sampler, seed=cfg.seed) as pool:
        collector = Collector(pool, agent)
        episodes = collector.collect(None)
        opened: set[tuple[Any, str]] = set()
        while len(opened) < n_tasks * cfg.env.num_envs:  # warm-up: every page opened
            t = next(episodes)
            opened.add((t.env_id, t.task))
        base = collector.stats.env_steps, collector.stats.agent_time_s, collector.stats.actions
        batches = collector.stats.batches
        t0 = time.perf_counter()
        got: list[Trajectory] = []
        for t in episodes:
            got.append(t)
            if time.perf_counter() - t0 >= seconds:
                break
        dt = time.perf_counter() - t0
        s = collector.stats
        steps = s.env_steps - base[0]
        device_s = sum(sum(st.device_time_s for st in t.steps) for t in got)
        reset_s = sum(t.reset_time_s for t in got)
        n = cfg.env.num_envs
        return {
            "steps_per_s": steps / dt,
            "episodes_per_s": len(got) / dt,
            "steps_per_episode": sum(t.length for t in got) / max(1, len(got)),
            "mean_batch": (s.actions - base[2]) / max(1, s.batches - batches),
            "share/device_step": device_s / (n * dt),
            "share/reset": reset_s / (n * dt),
            "share/inference": (s.agent_time_s - base[1]) / dt,
        }


# -- evaluation ----------------------------------------------------------------------------------
def evaluate(cfg: TrainConfig, episodes_per_task: int, folder: Path) -> dict[str, float]:
    """`devicerl eval` of the setup's agent: the whole evaluation timed, its shares from the
    episodes it stored (each step's device and agent time, each episode's reset)."""
    set_torch_threads()
    n_tasks = len(resolve(SUITE))
    cfg = replace(
        cfg,
        mode="eval",
        tasks=replace(cfg.tasks, eval=SUITE),
        eval=replace(cfg.eval, n_tasks=n_tasks, episodes_per_task=episodes_per_task),
    )
    run = RunDir(folder)
    run.create().save_config(cfg)
    trainer = make_trainer(cfg, run)  # the agent is built before the clock starts, as for collect
    t0, wall0 = time.perf_counter(), time.time()
    trainer.run()
    dt = time.perf_counter() - t0
    got = TrajectoryStore(run.trajectories).read_all(screenshots=False)
    if len(got) != n_tasks * episodes_per_task:
        raise SystemExit(f"evaluation stored {len(got)} of {n_tasks * episodes_per_task} episodes")
    steps = [s for t in got for s in t.steps]
    n = cfg.env.num_envs
    start = min(t.started_at for t in got) - wall0
    return {
        "steps_per_s": len(steps) / dt,
        "episodes_per_s": len(got) / dt,
        "episodes_per_s_after_start": len(got) / (dt - start),
        "steps_per_episode": len(steps) / len(got),
        "seconds": dt,
        "share/start": start / dt,
        "share/device_step": sum(s.device_time_s for s in steps) / (n * dt),
        "share/reset": sum(t.reset_time_s for t in got) / (n * dt),
        "share/inference": sum(s.agent_time_s for s in steps) / dt,
    }


# -- training ------------------------------------------------------------------------------------
def fleet_evaluate(cfg: TrainConfig, episodes_per_task: int, folder: Path) -> list[dict]:
    """`evaluate` twice on one warm fleet of the run's devices, started before the clock."""
    recipe = DeviceRecipe.from_spec(EnvSpec(cfg.env.name, cfg.env.options))
    fleet = Fleet(FLEET, recipe, cfg.env.num_envs, resolve(SUITE))
    started = fleet.start()
    print(f"fleet up in {started:.1f}s (not timed)", flush=True)
    attached = replace(cfg, env=replace(cfg.env, worker="fleet", fleet=FLEET))
    out = []
    try:
        with fleet.watching():
            for i in range(2):
                evaluated = folder.with_name(f"{folder.name}-{i}")
                shutil.rmtree(evaluated, ignore_errors=True)
                out.append(evaluate(attached, episodes_per_task, evaluated))
                out[-1]["fleet_restarts"] = fleet.restarts
    finally:
        fleet.stop()
    return out


class _Clock(TrainerObserver):
    """Env steps, episodes and learner time at every iteration, timed."""

    def __init__(self) -> None:
        self.marks: list[tuple[float, int, int, float]] = []

    def after_iteration(self, run: Any, metrics: dict[str, Any]) -> None:
        s = run.state
        self.marks.append(
            (time.perf_counter(), s.env_steps, s.episodes, metrics.get("time/learner_s", 0.0))
        )


def train(cfg: TrainConfig, seconds: float, warmup: float, folder: Path) -> dict[str, float]:
    """The setup trained online; measured over the iterations after ``warmup`` seconds."""
    run = RunDir(folder)
    run.create().save_config(cfg)
    trainer = make_trainer(cfg, run)
    clock = _Clock()
    trainer.register_observer(clock)
    timer = threading.Timer(warmup + seconds, trainer.stop.request)
    t0 = time.perf_counter()
    timer.start()
    try:
        trainer.run()
    finally:
        timer.cancel()
    marks = [m for m in clock.marks if m[0] - t0 >= warmup]
    if len(marks) < 2:
        raise SystemExit(
            "training made fewer than two iterations after the warm-up: raise --seconds"
        )
    (ta, sa, ea, _), (tb, sb, eb, _) = marks[0], marks[-1]
    learner_s = sum(m[3] for m in marks[1:])
    return {
        "steps_per_s": (sb - sa) / (tb - ta),
        "episodes_per_s": (eb - ea) / (tb - ta),
        "share/learner": learner_s / (tb - ta),
    }


def learner(cfg: TrainConfig, stored: Path, iterations: int, folder: Path) -> dict[str, float]:
    """The setup's learner alone on the trajectories in ``stored`` (a run folder): offline
    iterations, timed from the second on."""
    cfg = replace(cfg, mode="offline", offline_data=str(stored), offline_iterations=iterations + 1)
    run = RunDir(folder)
    run.create().save_config(cfg)
    make_trainer(cfg, run).run()
    marks = [json.loads(line)["time"] for line in (folder / "metrics.jsonl").open()]
    per_iteration = (marks[-1] - marks[0]) / (len(marks) - 1)
    return {
        "seconds_per_iteration": per_iteration,
        "episodes_per_s": cfg.trajectories_per_iter / per_iteration,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=60.0, help="measured window of each part")
    ap.add_argument("--warmup", type=float, default=60.0, help="training: seconds not measured")
    ap.add_argument("--pixels", action="store_true", help="screenshots and the pixel agent")
    ap.add_argument("--parts", nargs="+", default=["raw", "collect", "eval", "train", "learner"])
    ap.add_argument("--eval-episodes", type=int, default=50, help="eval: seeds of each task")
    ap.add_argument("--iterations", type=int, default=8, help="learner: timed iterations")
    ap.add_argument("--out", default="runs/loop-throughput", help="the training run's folder")
    ap.add_argument("--json", help="write the numbers here")
    ap.add_argument("overrides", nargs="*", help="extra KEY=VALUE config overrides")
    args = ap.parse_args()
    cfg = setup_config(args)
    out: dict[str, Any] = {
        "command": " ".join(["python", *sys.argv]),
        "devices": args.devices,
        "pixels": args.pixels,
        "seconds": args.seconds,
    }
    if "raw" in args.parts:
        out["raw"] = raw(cfg, args.seconds)
        print("raw     ", json.dumps(out["raw"]), flush=True)
    if "collect" in args.parts:
        out["collect"] = collect(cfg, args.seconds)
        print("collect ", json.dumps(out["collect"]), flush=True)
    folder = Path(args.out) / ("pixels" if args.pixels else "dom")  # the training run
    if "eval" in args.parts:
        evaluated = folder.with_name(folder.name + "-eval")
        shutil.rmtree(evaluated, ignore_errors=True)
        out["eval"] = evaluate(cfg, args.eval_episodes, evaluated)
        print("eval    ", json.dumps(out["eval"]), flush=True)
    if "fleet-eval" in args.parts:
        out["fleet_eval"] = fleet_evaluate(
            cfg, args.eval_episodes, folder.with_name(folder.name + "-fleet-eval")
        )
        for r in out["fleet_eval"]:
            print("fleet-eval", json.dumps(r), flush=True)
    if "train" in args.parts:
        shutil.rmtree(folder, ignore_errors=True)
        out["train"] = train(replace(cfg), args.seconds, args.warmup, folder)
        print("train   ", json.dumps(out["train"]), flush=True)
    if "learner" in args.parts:
        alone = folder.with_name(folder.name + "-learner")
        shutil.rmtree(alone, ignore_errors=True)
        out["learner"] = learner(cfg, folder, args.iterations, alone)
        print("learner ", json.dumps(out["learner"]), flush=True)
    out["provenance"] = provenance()
    if "eval" in out:
        for base in ("raw", "collect"):
            if base in out:
                ratio = out["eval"]["episodes_per_s"] / out[base]["episodes_per_s"]
                out[f"eval_vs_{base}"] = ratio
                print(f"eval_vs_{base}={ratio:.2f}")
    if "fleet_eval" in out and "collect" in out:
        ratios = [r["episodes_per_s"] / out["collect"]["episodes_per_s"] for r in out["fleet_eval"]]
        out["fleet_eval_vs_collect"] = ratios
        print("fleet_eval_vs_collect=" + ",".join(f"{r:.2f}" for r in ratios))
    if all(k in out for k in ("raw", "collect", "train")):
        cv = out["collect"]["episodes_per_s"] / out["raw"]["episodes_per_s"]
        tc = out["train"]["episodes_per_s"] / out["collect"]["episodes_per_s"]
        out["result"] = (
            f"RESULT collect_vs_raw={cv:.2f} train_vs_collect={tc:.2f} pixels={args.pixels}"
        )
        if "learner" in out:
            lc = out["learner"]["episodes_per_s"] / out["collect"]["episodes_per_s"]
            print(f"learner_vs_collect={lc:.2f}")
            out["learner_vs_collect"] = lc
        print(out["result"])
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
