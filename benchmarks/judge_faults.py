"""Runs against a failing endpoint end with their budget: a judge and an API agent answering 500.

Two real command-line runs on synthetic devices, each against the scripted chat server
(`devicerl.testing.chat_server`) answering every request with HTTP 500:

- ``judge``: ``devicerl collect`` with the VLM judge on that endpoint. Every episode's judging
  spends its budget (``judge.chat.timeout_s`` x 5 attempts) and the episode is stored
  unlabelled. Measured: how long the process lives after the devices' last step
  (``exit_after_last_step_s``; the goal: within 10 s of the judge's per-episode budget), the
  judge requests the server got after the process ended (goal: 0), and the unlabelled count
  and reasons the run reported.
- ``agent``: ``devicerl eval`` with the API agent (``agent.kind=api``) on that endpoint:
  requests and seconds per episode (an episode's actions share one failure budget; each of its
  actions used to make its own retries, 15 s per action with the default backoff).

Usage: python benchmarks/judge_faults.py [--quick] [--parts judge agent] [--json PATH]
Last line: RESULT judge_exit_after_last_step_s=... judge_budget_s=... within_10s_of_budget=...
unlabelled=... late_requests=... agent_requests_per_episode=... agent_s_per_episode=...
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from devicerl.data.store import TrajectoryStore
from devicerl.runtime.runs.provenance import provenance
from devicerl.testing.chat_server import Reply, ScriptedChatServer

#: Attempts a request gets (the chat client's retries + 1), so each episode's judging budget is
#: this many ``judge.chat.timeout_s``.
ATTEMPTS = 5
DEVICES = [
    "env.name=synthetic",
    "env.num_envs=2",
    "env.worker=serial",
    "logging.tensorboard=false",
]


def devicerl(args: list[str], timeout_s: float) -> tuple[int, str, str, float]:
    """``devicerl ARGS`` in a new process: (exit code, stdout, stderr, wall time it ended)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.run(
        [sys.executable, "-m", "devicerl", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
    )
    return proc.returncode, proc.stdout, proc.stderr, time.time()


def last_step_time(run: Path) -> float:
    """Wall time of the newest step stored in ``run`` (when the device finished it)."""
    stored = TrajectoryStore(run / "trajectories").read_all()
    return max(s.started_at + s.agent_time_s + s.device_time_s for t in stored for s in t.steps)


def judge_run(srv: ScriptedChatServer, folder: Path, env_steps: int, timeout_s: float) -> dict:
    run = folder / "judge"
    code, out, err, ended = devicerl(
        [
            "collect",
            "--out",
            str(run),
            *DEVICES,
            "tasks.train=synthetic/tap",
            f"env_steps={env_steps}",
            "judge.kind=vlm",
            "judge.chat.model=judge",
            f"judge.chat.base_url={srv.base_url}",
            f"judge.chat.timeout_s={timeout_s}",
            "judge.vlm.cache_path=",
        ],
        timeout_s=600,
    )
    if code != 0:
        raise SystemExit(f"the judged run failed ({code}):\n{err[-2000:]}")
    ended_mono = time.monotonic()
    summary = json.loads(out.strip().splitlines()[-1])
    time.sleep(2.0)  # a process left behind would go on asking
    late = sum(r.at > ended_mono for r in srv.requests)
    budget = ATTEMPTS * timeout_s
    after = ended - last_step_time(run)
    said = [line for line in err.splitlines() if "stored unlabelled" in line]
    return {
        "exit_after_last_step_s": after,
        "budget_s": budget,
        "within_10s_of_budget": after <= budget + 10.0,
        "unlabelled": summary["unlabelled"],
        "unlabelled_reasons": summary.get("unlabelled_reasons", {}),
        "episodes": summary["episodes"],
        "env_steps": summary["env_steps"],
        "requests": len(srv.requests),
        "late_requests": late,
        "message": said[-1] if said else None,
    }


def agent_run(srv: ScriptedChatServer, folder: Path, episodes: int) -> dict:
    run = folder / "agent"
    before = len(srv.requests)
    t0 = time.time()
    code, _, err, ended = devicerl(
        [
            "eval",
            "--out",
            str(run),
            *DEVICES,
            "tasks.train=synthetic/steps",
            "tasks.max_steps=5",
            "eval.n_tasks=1",
            f"eval.episodes_per_task={episodes}",
            "agent.kind=api",
            "agent.api.chat.model=agent",
            f"agent.api.chat.base_url={srv.base_url}",
        ],
        timeout_s=600,
    )
    if code != 0:
        raise SystemExit(f"the API agent's run failed ({code}):\n{err[-2000:]}")
    stored = TrajectoryStore(run / "trajectories").read_all()
    requests = len(srv.requests) - before
    return {
        "episodes": len(stored),
        "steps": sum(t.length for t in stored),
        "requests": requests,
        "requests_per_episode": requests / max(1, len(stored)),
        "wall_s": ended - t0,
        "s_per_episode": (ended - t0) / max(1, len(stored)),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="shorter runs (about a minute)")
    p.add_argument("--timeout-s", type=float, default=1.0, help="judge.chat.timeout_s")
    p.add_argument("--parts", nargs="+", default=["judge", "agent"], choices=["judge", "agent"])
    p.add_argument("--json", default=None, metavar="PATH")
    args = p.parse_args()
    env_steps, episodes = (40, 4) if args.quick else (120, 8)
    judge: dict[str, Any] = {}
    agent: dict[str, Any] = {}
    with (
        ScriptedChatServer(lambda body: Reply(status=500)) as srv,
        tempfile.TemporaryDirectory() as tmp,
    ):
        if "judge" in args.parts:
            judge = judge_run(srv, Path(tmp), env_steps, args.timeout_s)
            print(
                f"judge: process ended {judge['exit_after_last_step_s']:.1f} s after the last "
                f"step (per-episode budget {judge['budget_s']:.1f} s); {judge['unlabelled']} "
                f"episodes unlabelled {judge['unlabelled_reasons']}; "
                f"{judge['late_requests']} requests after exit"
            )
        if "agent" in args.parts:
            agent = agent_run(srv, Path(tmp), episodes)
            print(
                f"agent: {agent['requests']} requests for {agent['episodes']} episodes of "
                f"{agent['steps']} steps; {agent['s_per_episode']:.1f} s per episode"
            )
    result: dict[str, Any] = {
        "command": " ".join(["judge_faults.py", *sys.argv[1:]]),
        "commit": provenance()["git_commit"],
        "uncommitted_changes": provenance()["git_dirty"],
        "judge": judge,
        "agent": agent,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    line = []
    if judge:
        line += [
            f"judge_exit_after_last_step_s={judge['exit_after_last_step_s']:.1f}",
            f"judge_budget_s={judge['budget_s']:.1f}",
            f"within_10s_of_budget={judge['within_10s_of_budget']}",
            f"unlabelled={judge['unlabelled']}",
            f"late_requests={judge['late_requests']}",
        ]
    if agent:
        line += [
            f"agent_requests_per_episode={agent['requests_per_episode']:.1f}",
            f"agent_s_per_episode={agent['s_per_episode']:.1f}",
        ]
    print("RESULT " + " ".join(line))
    return 1 if judge and (not judge["within_10s_of_budget"] or judge["late_requests"]) else 0


if __name__ == "__main__":
    raise SystemExit(main())
