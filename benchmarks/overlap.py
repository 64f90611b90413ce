"""Overlapping learning with acting against the lockstep loop, side by side in one run.

Online DigiRL on synthetic devices whose steps take real time (like phones and browsers), the
same env budget for each variant:
- ``lockstep``: ``overlap=false``: the devices wait while the learner updates (the reference);
- ``overlap``: the devices keep acting while the learner updates (the default).
Prints wall-clock, env steps/s, final success and mean policy lag per variant, with ratios to
lockstep; writes JSON. The last line is
``RESULT overlap_speedup=X lockstep_success=X overlap_success=X``.

    python benchmarks/overlap.py [--budget 1200] [--seeds 0 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from devicerl.config import load_config
from devicerl.runtime.loop.factory import make_trainer
from devicerl.runtime.runs.folder import RunDir
from devicerl.runtime.setup.config import TrainConfig

BASE = [
    "env.name=synthetic",
    "env.num_envs=4",
    "env.options={step_latency: 'uniform:0.02,0.06', reset_latency: 0.05}",
    "tasks.train=synthetic/tap",
    "trajectories_per_iter=16",
    "eval.n_tasks=1",
    "eval.episodes_per_task=100",
    "eval.greedy=false",
    "logging.tensorboard=false",
    "checkpoint_every=1000000",
    "actor.lr=3e-3",
    "critic.lr=3e-3",
    "actor.updates=8",
    "actor.batch_size=32",
]
VARIANTS = {
    "lockstep": ["overlap=false"],
    "overlap": ["overlap=true"],
}


def run(name: str, seed: int, budget: int, root: Path) -> dict[str, float]:
    cfg = load_config(
        TrainConfig, None, [*BASE, *VARIANTS[name], f"seed={seed}", f"env_steps={budget}"]
    )
    run_dir = RunDir(root / f"{name}-s{seed}").create()
    t0 = time.time()
    s = make_trainer(cfg, run_dir).run()
    # the training phase only: the (identical) evaluation is not part of the comparison
    metrics = [m for m in run_dir.read_metrics() if "train/iteration" in m]
    train_s = metrics[-1]["time"] - t0 if metrics else 0.0
    return {
        "train_s": train_s,
        "steps_per_s": s["env_steps"] / train_s if train_s > 0 else 0.0,
        "success": s["eval"]["success_rate"],
        "mean_policy_lag": s["mean_policy_lag"] or 0.0,
        "iterations": s["iteration"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=int, default=1200)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            for name in VARIANTS:  # interleaved, so machine noise hits every variant alike
                rows[name].append(run(name, seed, args.budget, Path(tmp)))
    means = {n: {k: float(np.mean([r[k] for r in rs])) for k in rs[0]} for n, rs in rows.items()}
    base = means["lockstep"]
    print(f"{'variant':16s} {'train s':>8s} {'steps/s':>8s} {'x lockstep':>10s} {'success':>8s} "
          f"{'lag':>5s} {'iters':>6s}")  # fmt: skip
    for n, m in means.items():
        print(
            f"{n:16s} {m['train_s']:8.1f} {m['steps_per_s']:8.1f} "
            f"{m['steps_per_s'] / base['steps_per_s']:10.2f} {m['success']:8.3f} "
            f"{m['mean_policy_lag']:5.2f} {m['iterations']:6.1f}"
        )
    out = {"budget": args.budget, "seeds": args.seeds, "runs": rows, "means": means}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    ov = means["overlap"]
    print(
        f"RESULT overlap_speedup={ov['steps_per_s'] / base['steps_per_s']:.3f} "
        f"lockstep_success={base['success']:.3f} overlap_success={ov['success']:.3f}"
    )


if __name__ == "__main__":
    main()
