"""Seconds per MiniWoB++ episode: our browser device against BrowserGym's, side by side.

The same scripted solver plays the same tasks on both devices, one device at a time, in this
process, so the only difference is the device: ``miniwob/<task>`` (ours: one Chromium kept
across episodes, the task restarted in place, pages settled as soon as animations end) and
``browsergym/miniwob.<task>`` (BrowserGym 0.14.3 in its own environment, through our foreign
device: a new browser and chat window per episode, Playwright's 100 ms ``slow_mo`` per call and
a 0.5 s wait before each observation, as BrowserGym's MiniWoB++ sets them). Each episode is
reset + steps until it ends; the first episode of each device is a warm-up, not counted.
Tasks: click-test (1 step), click-button (1 step), enter-text (3 steps: the field, the text,
Submit).

    python benchmarks/browsergym_speed.py --episodes 5 --json benchmarks/results/X.json

The last line is ``RESULT browsergym_over_ours=X ours_s=Y browsergym_s=Z`` (mean seconds per
episode, and their ratio).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devicerl.actions import Action
from devicerl.envs import make
from devicerl.records import Observation

TASKS = ("click-test", "click-button", "enter-text")


def _tap(obs: Observation, role: str, text: str | None = None) -> Action:
    for e in obs.elements:
        if e.role == role and (text is None or e.text.strip() == text):
            return Action.tap(*obs.to_normalised(*e.center))
    raise AssertionError(f"no {role} {text!r} on the screen: {[e.role for e in obs.elements]}")


def solve(task: str, obs: Observation, step: int) -> Action:
    """The scripted solution's action at ``step`` (the same on both devices)."""
    quoted = re.findall(r'"([^"]*)"', obs.instruction)
    if task == "click-test":
        return _tap(obs, "button")
    if task == "click-button":
        return _tap(obs, "button", quoted[0])
    return [_tap(obs, "textbox"), Action.type_text(quoted[0]), _tap(obs, "button", "Submit")][step]


def play(device: str, episodes: int) -> dict:
    """Time ``episodes`` episodes of every task on one device of kind ``device``."""
    out: dict = {"episodes": [], "success": 0}
    for task in TASKS:
        env = make(f"{device}{task}")
        try:
            for i in range(episodes + 1):  # the first is a warm-up
                t0 = time.perf_counter()
                obs, step, result = env.reset(seed=100 + i), 0, None
                reset_s = time.perf_counter() - t0
                while result is None or not result.done:
                    result = env.step(solve(task, obs, step))
                    obs, step = result.observation, step + 1
                if i:
                    wall = time.perf_counter() - t0
                    out["episodes"].append({"task": task, "s": wall, "reset_s": reset_s,
                                            "steps": step})  # fmt: skip
                    out["success"] += int(result.info["success"])
        finally:
            env.close()
    times = [e["s"] for e in out["episodes"]]
    out["mean_s"] = statistics.mean(times)
    out["mean_reset_s"] = statistics.mean(e["reset_s"] for e in out["episodes"])
    out["n"] = len(times)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=5, help="timed episodes per task and device")
    ap.add_argument("--json", help="write the measurements here")
    args = ap.parse_args()
    from devicerl.envs.browsergym.env import browsergym_python
    from devicerl.runtime.runs.provenance import provenance

    browsergym_python(None)  # refuses in one line when BrowserGym's environment is missing
    ours = play("miniwob/", args.episodes)
    theirs = play("browsergym/miniwob.", args.episodes)
    ratio = theirs["mean_s"] / ours["mean_s"]
    for name, r in (("ours", ours), ("browsergym", theirs)):
        print(
            f"{name}: {r['mean_s']:.3f} s per episode ({r['mean_reset_s']:.3f} s reset), "
            f"{r['success']}/{r['n']} solved"
        )
    line = (
        f"RESULT browsergym_over_ours={ratio:.2f} ours_s={ours['mean_s']:.3f} "
        f"browsergym_s={theirs['mean_s']:.3f}"
    )
    print(line)
    if args.json:
        report = {
            "command": ["python", "benchmarks/browsergym_speed.py", *sys.argv[1:]],
            "tasks": list(TASKS),
            "ours": ours,
            "browsergym": theirs,
            "ratio": ratio,
            "provenance": provenance(),
            "result": line,
        }
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
