"""How fast the small agent learns: behaviour cloning on oracle demonstrations (CPU).

Side by side in one run: the small agent with its instruction/element overlap features (the
default), the same agent without them (ablation), the untrained agent and the random policy.
Each learner trains on demonstrations of ``synthetic/tap`` and ``synthetic/type`` (scripted
oracle, held-out seeds for evaluation); success is measured with greedy actions every
``--eval-every`` updates. Reports updates and wall-clock seconds to reach 90 % success on both.

    python benchmarks/small_agent_learning.py [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
import time

import torch

from devicerl.agents.random import RandomPolicy
from devicerl.agents.scripted import SyntheticOracle
from devicerl.agents.small import SmallAgent
from devicerl.agents.small.config import FeatureConfig
from devicerl.envs import make
from devicerl.runtime.acting.rollout import rollout

TARGET = 0.9


def demonstrations(kind: str, seeds: range) -> list:
    env, oracle, task = (
        make(f"synthetic/{kind}", render=False),
        SyntheticOracle(),
        f"synthetic/{kind}",
    )
    return [
        (st.observation, st.action) for s in seeds for st in rollout(env, oracle, task, s).steps
    ]


def success(policy, kind: str, seeds: range) -> float:
    env, task = make(f"synthetic/{kind}", render=False), f"synthetic/{kind}"
    return sum(rollout(env, policy, task, s, greedy=True).success for s in seeds) / len(seeds)


def train(agent: SmallAgent, data: list, args, evals: range) -> dict:
    opt = torch.optim.Adam(agent.parameters(), lr=args.lr)
    rng, curve, reached, train_s = random.Random(0), [], None, 0.0
    for update in range(1, args.updates + 1):
        t0 = time.perf_counter()
        batch = rng.sample(data, args.batch)
        loss = -agent.log_prob([o for o, _ in batch], [a for _, a in batch]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        train_s += time.perf_counter() - t0
        if update % args.eval_every == 0:
            tap, typ = success(agent, "tap", evals), success(agent, "type", evals)
            curve.append({"update": update, "train_s": train_s, "tap": tap, "type": typ})
            print(f"  update {update:4d}  train {train_s:6.1f}s  tap {tap:.2f}  type {typ:.2f}")
            if reached is None and min(tap, typ) >= TARGET:
                reached = {"updates": update, "train_s": train_s}
                if args.stop_at_target:
                    break
    return {"curve": curve, "reached": reached}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer updates and evaluation episodes")
    ap.add_argument("--updates", type=int, default=400)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--stop-at-target", action="store_true", help="stop once 90 %% is reached")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    if args.quick:
        args.updates, args.stop_at_target = 150, True
    torch.set_num_threads(args.threads)
    evals = range(10_000, 10_000 + (30 if args.quick else 100))
    data = demonstrations("tap", range(150)) + demonstrations("type", range(150))
    results: dict[str, dict] = {
        "random": {"tap": success(RandomPolicy(), "tap", evals)},
        "untrained": {"tap": success(SmallAgent(), "tap", evals)},
    }
    results["random"]["type"] = success(RandomPolicy(), "type", evals)
    results["untrained"]["type"] = success(SmallAgent(), "type", evals)
    for name, features in (
        ("small", FeatureConfig()),
        ("small-no-overlap", FeatureConfig(overlap_features=False)),
    ):
        print(f"{name}:")
        results[name] = train(SmallAgent(features=features, seed=1), data, args, evals)
    print("\nsystem             tap   type   updates to 90 %   train s to 90 %")
    for name, r in results.items():
        last = r["curve"][-1] if "curve" in r else r
        hit = r.get("reached") or {}
        print(
            f"{name:17s} {last['tap']:5.2f} {last['type']:6.2f} {hit.get('updates', '-')!s:>17s}"
            f" {hit.get('train_s', float('nan')):17.1f}"
        )
    a, b = results["small"].get("reached"), results["small-no-overlap"].get("reached")
    if a and b:
        print(f"overlap features: {b['updates'] / a['updates']:.2f}x fewer updates to 90 %")
    elif a:
        print(f"without overlap features 90 % was not reached in {args.updates} updates")
    report = {"args": vars(args), "results": results}
    print(json.dumps(report))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
