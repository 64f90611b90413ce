"""CPU inference throughput of the small agent (observations per second).

Runs side by side in one process: the small agent on UI elements only (the default), the same
agent with one torch thread (on a busy shared CPU, two threads per process oversubscribe it), the
agent with a downscaled screenshot, and (for reference) the random policy; at batch sizes 1, 16
and 64, on observations with realistic element counts (default 32 elements, a 12-word
instruction, a 270x585 screenshot). Also reports the featurisation share of the time and a
training step (log_prob + backward) throughput. Goal: >= 200 obs/s at batch 16.

    python benchmarks/agent_inference.py [--quick] [--elements 32] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
import time

import numpy as np
import torch

from devicerl.agents.random import RandomPolicy
from devicerl.agents.small import SmallAgent
from devicerl.agents.small.config import FeatureConfig
from devicerl.records import Observation, UIElement

WORDS = (
    "search", "settings", "account", "login", "password", "email", "submit", "cancel", "next",
    "back", "home", "menu", "cart", "price", "shipping", "order", "review", "filter", "sort",
    "apply", "save", "delete", "edit", "share", "open", "close",
)  # fmt: skip
ROLES = ("button", "link", "textbox", "text", "checkbox", "image", "listitem", "heading")
GOAL = 200.0


def realistic_observations(n: int, n_elements: int, seed: int = 0) -> list[Observation]:
    rng = random.Random(seed)
    screen = np.random.default_rng(seed).integers(0, 255, (585, 270, 3), dtype=np.uint8)
    out = []
    for _ in range(n):
        elements = []
        for j in range(n_elements):
            x, y = rng.uniform(0, 230), rng.uniform(0, 560)
            w, h = rng.uniform(20, 200), rng.uniform(12, 60)
            elements.append(
                UIElement(
                    f"e{j}",
                    rng.choice(ROLES),
                    " ".join(rng.choices(WORDS, k=rng.randint(0, 4))),
                    value=rng.choice(["", "", "", "john@example.com"]),
                    bbox=(x, y, min(270.0, x + w), min(585.0, y + h)),
                    clickable=rng.random() < 0.6,
                    editable=rng.random() < 0.1,
                )
            )
        instruction = " ".join(rng.choices(WORDS, k=12))
        out.append(Observation(instruction, (270, 585), screen, elements))
    return out


def _rate(fn, n_obs: int, seconds: float) -> float:
    fn()  # warm-up
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        done += n_obs
    return done / (time.perf_counter() - t0)


def _measure(agent, obs: list[Observation], seconds: float) -> dict[str, float]:
    row = {}
    for b in (1, 16, 64):
        row[f"act_b{b}_obs_s"] = _rate(lambda b=b: agent.act(obs[:b]), b, seconds)
    if isinstance(agent, SmallAgent):
        row["featurize_b16_obs_s"] = _rate(lambda: agent.featurize(obs[:16]), 16, seconds)
        actions = [s.action for s in agent.act(obs)]
        step = lambda: agent.log_prob(obs, actions).sum().backward()  # noqa: E731
        row["train_b64_obs_s"] = _rate(step, len(obs), seconds)
        row["params"] = float(agent.num_parameters())
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short measurements (development)")
    ap.add_argument("--elements", type=int, default=32, help="UI elements per observation")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    seconds = 0.5 if args.quick else 2.0
    obs = realistic_observations(64, args.elements)
    default_threads = torch.get_num_threads()
    small = SmallAgent()
    systems = {  # name -> (agent, torch threads)
        "small": (small, default_threads),
        "small@1thread": (small, 1),
        "small+screenshot": (
            SmallAgent(features=FeatureConfig(screenshot_size=(64, 128))),
            default_threads,
        ),
        "small+reach": (  # every option of docs/agent-actions.md on
            SmallAgent(
                heads=("swipes", "points", "page_text", "free_text"),
                features=FeatureConfig(pixels=True, dom_flags=False),
            ),
            default_threads,
        ),
        "random": (RandomPolicy(), default_threads),
    }
    results = {}
    for name, (agent, threads) in systems.items():
        torch.set_num_threads(threads)
        results[name] = _measure(agent, obs, seconds)
    torch.set_num_threads(default_threads)
    keys = ("act_b1_obs_s", "act_b16_obs_s", "act_b64_obs_s", "featurize_b16_obs_s",
            "train_b64_obs_s")  # fmt: skip
    print(f"{'system':18s}" + "".join(f"{k.removesuffix('_obs_s'):>14s}" for k in keys))
    for name, row in results.items():
        cells = [row.get(k) for k in keys]
        print(f"{name:18s}" + "".join(f"{c:14.0f}" if c else f"{'-':>14s}" for c in cells))
    small, shot = results["small"], results["small+screenshot"]
    best = max(small["act_b16_obs_s"], results["small@1thread"]["act_b16_obs_s"])
    ratios = {
        "small_b16_vs_goal": small["act_b16_obs_s"] / GOAL,
        "small_b16_vs_b1": small["act_b16_obs_s"] / small["act_b1_obs_s"],
        "screenshot_cost_b16": small["act_b16_obs_s"] / shot["act_b16_obs_s"],
        "featurize_share_b16": small["act_b16_obs_s"] / small["featurize_b16_obs_s"],
        "one_thread_vs_default_b16": results["small@1thread"]["act_b16_obs_s"]
        / small["act_b16_obs_s"],
    }
    for k, v in ratios.items():
        print(f"{k}: {v:.2f}")
    verdict = "meets" if best >= GOAL else "MISSES"
    print(f"small agent, batch 16, best thread setting: {best:.0f} obs/s ({verdict} {GOAL:.0f})")
    report = {
        "elements": args.elements,
        "default_threads": default_threads,
        "quick": args.quick,
        "results": results,
        "ratios": ratios,
    }
    print(json.dumps(report))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
