"""Does a slow judge slow the devices? Inline (blocking) vs asynchronous judging, side by side.

A producer runs real synthetic episodes (with a simulated device latency) and hands each
finished episode to a VLM judge served by a local chat server that answers after ``--delay``
seconds. Three systems, same episodes:

- ``native``: the task's own check (no judge latency): the devices' own pace;
- ``inline``: judge each episode before starting the next (a blocking judge, as in the
  reference, where the loop waits for the judge);
- ``async``: `JudgeRunner` (submit and carry on; verdicts arrive later).

Prints episodes/s produced and the time until every verdict is in, with ratios; ``--json PATH``
writes them. ``python benchmarks/judge_async.py --quick``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from devicerl.agents import RandomPolicy
from devicerl.clients import ChatConfig
from devicerl.envs import make
from devicerl.judges import JudgeRunner, NativeJudge, VLMJudgeConfig
from devicerl.judges.vlm import VLMJudge
from devicerl.runtime.acting.rollout import rollout
from devicerl.testing.chat_server import Reply, ScriptedChatServer


def run(system: str, n: int, judge, workers: int, step_latency: float) -> dict[str, float]:
    env = make("synthetic", step_latency=step_latency, seed=0)
    policy = RandomPolicy(seed=0)
    runner = JudgeRunner(judge, workers=workers) if system == "async" else None
    t0 = time.perf_counter()
    for i in range(n):
        traj = rollout(env, policy, "synthetic/tap", seed=i)
        if runner is not None:
            runner.submit(traj)
        else:
            judge.judge(traj)
    produced = time.perf_counter() - t0
    if runner is not None:
        runner.drain()
        runner.close()
    done = time.perf_counter() - t0
    env.close()
    return {"episodes_per_s": n / produced, "produce_s": produced, "all_judged_s": done}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=60)
    ap.add_argument("--delay", type=float, default=0.5, help="seconds per judge reply")
    ap.add_argument("--concurrency", type=int, default=8, help="judge requests in flight")
    ap.add_argument("--step-latency", type=float, default=0.02, help="device seconds per step")
    ap.add_argument("--quick", action="store_true", help="a short run (20 episodes, 0.2 s)")
    ap.add_argument("--json", default=None, metavar="PATH")
    args = ap.parse_args(argv)
    if args.quick:
        args.episodes, args.delay = 20, 0.2

    def slow(body: dict) -> Reply:
        time.sleep(args.delay)
        return Reply("Rationale: scripted.\nVerdict: FAILURE")

    results: dict[str, dict[str, float]] = {}
    with ScriptedChatServer(slow) as srv, tempfile.TemporaryDirectory() as tmp:
        chat = ChatConfig(base_url=srv.base_url, model="bench", max_concurrency=args.concurrency)
        for system in ("native", "inline", "async"):
            cache = str(Path(tmp) / f"{system}.sqlite")  # a fresh cache: every verdict is asked
            judge = (
                NativeJudge()
                if system == "native"
                else VLMJudge(chat, VLMJudgeConfig(cache_path=cache))
            )
            results[system] = run(system, args.episodes, judge, args.concurrency, args.step_latency)
            judge.close()
    base = results["native"]["episodes_per_s"]
    out = {
        "config": vars(args),
        "results": results,
        "ratios": {
            "async_vs_inline_episodes_per_s": results["async"]["episodes_per_s"]
            / results["inline"]["episodes_per_s"],
            "async_vs_native_episodes_per_s": results["async"]["episodes_per_s"] / base,
            "inline_vs_native_episodes_per_s": results["inline"]["episodes_per_s"] / base,
        },
    }
    for system, r in results.items():
        print(
            f"{system:7s} {r['episodes_per_s']:8.1f} episodes/s produced   "
            f"all verdicts in after {r['all_judged_s']:.2f} s"
        )
    for k, v in out["ratios"].items():
        print(f"{k}: {v:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
