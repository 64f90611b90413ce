"""Write the compatibility fixtures: ``python -m tests.compat.record`` from the repository root.

What data and agents saved by devicerl mean, recorded once so that later versions can show they
still read them the same way (`tests/test_compat.py`):

- ``fixtures/actions.json``: actions of every type as `Action.to_json` and `format_autoui` wrote
  them (the JSON must parse to the same action and re-serialise to the same bytes);
- ``store/``: a trajectory store (two synthetic episodes whose actions cover every type) and
  ``fixtures/store.json``, what reading it gave (actions, rewards, end reasons, screenshots);
- ``fixtures/agents.json``: the committed agents under ``benchmarks/agents/`` on fixed synthetic
  screens (with and without earlier actions): greedy action and its log-prob, and the log-probs
  of a fixed list of actions with and without the exploration floor.

Every file names the git commit it was recorded at.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import torch

from devicerl.actions import Action, format_autoui
from devicerl.data.store import TrajectoryStore, TrajectoryWriter
from devicerl.envs import make
from devicerl.records import EndReason, Observation, Step, Trajectory, with_previous_actions

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FIXTURES = HERE / "fixtures"
STORE = HERE / "store"
AGENTS = ("webskills-2026-11-27", "webskills-labels-2026-11-27", "webskills-reach-2026-11-27")


def commit() -> str:
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip()


def sample_actions() -> list[Action]:
    """One or more actions of every type a store written then could hold."""
    return [
        Action.tap(0.25, 0.5),
        Action.tap(0.0, 1.0),
        Action.swipe(0.5, 0.8, 0.5, 0.2),
        Action.swipe(0.1234567, 0.7654321, 0.9, 0.05),
        Action.type_text("weather in Paris"),
        Action.type_text('he said "hi", ok [1, 2]\nnext\tcol é 漢字 🙂'),
        Action.type_text(""),
        Action.back(),
        Action.home(),
        Action.enter(),
        Action.complete(),
        Action.impossible(),
        Action.invalid('Action Decision: "action_type": "FLY"', "unknown action_type 'FLY'"),
    ]


def record_actions() -> dict[str, Any]:
    return {
        "commit": commit(),
        "actions": [
            {
                "json": a.to_json(),
                "autoui": format_autoui(a),
                "autoui_3": format_autoui(a, precision=3),
                "describe": a.describe(),
            }
            for a in sample_actions()
        ],
    }


def _episode(task: str, seed: int, actions: list[Action], **options: Any) -> Trajectory:
    env = make("synthetic", screen=(48, 64), seed=seed, **options)
    try:
        obs = env.reset(task, seed=seed)
        traj = Trajectory(task=task, instruction=obs.instruction, seed=seed, device="synthetic")
        for action in actions:
            result = env.step(action)
            info = {k: v for k, v in result.info.items() if not k.endswith("_s")}
            traj.steps.append(
                Step(obs, action, result.reward, result.terminated, result.truncated, info)
            )
            obs = result.observation
            if result.terminated or result.truncated:
                break
        traj.final_observation = obs
        end = result.info.get("end_reason", EndReason.MAX_STEPS.value)
        traj.end(EndReason(end), success=bool(result.reward))
        return traj
    finally:
        env.close()


def _digest(obs: Observation | None) -> str | None:
    if obs is None or obs.screenshot is None:
        return None
    return hashlib.sha256(obs.screenshot.tobytes()).hexdigest()


def _describe(t: Trajectory) -> dict[str, Any]:
    return {
        "episode_id": t.episode_id,
        "task": t.task,
        "instruction": t.instruction,
        "seed": t.seed,
        "end_reason": t.end_reason.value if t.end_reason else None,
        "success": t.success,
        "actions": [s.action.to_json() for s in t.steps],
        "rewards": [s.reward for s in t.steps],
        "terminated": [s.terminated for s in t.steps],
        "infos": [s.info for s in t.steps],
        "screens": [_digest(s.observation) for s in t.steps] + [_digest(t.final_observation)],
    }


def record_store() -> dict[str, Any]:
    """A two-episode store whose actions cover every type, and what reading it gives."""
    every = [
        Action.swipe(0.5, 0.8, 0.5, 0.2),
        Action.back(),
        Action.home(),
        Action.enter(),
        Action.invalid("junk", "no action_type found"),
        Action.type_text("héllo"),
        Action.tap(0.5, 0.5),
        Action.impossible(),
    ]
    trajectories = [
        _episode("synthetic/steps", 3, every, min_len=10, max_len=10),
        _episode("synthetic/tap", 1, [Action.tap(0.99, 0.01), Action.complete()]),
    ]
    if STORE.exists():
        shutil.rmtree(STORE)
    with TrajectoryWriter(STORE, flush_every=2) as writer:
        writer.extend(trajectories)
    read = sorted(TrajectoryStore(STORE), key=lambda t: t.task)
    return {"commit": commit(), "episodes": [_describe(t) for t in read]}


def agent_observations() -> list[Observation]:
    """Fixed synthetic screens (tap and type tasks), some with earlier actions."""
    out = []
    for task, seed in (("synthetic/tap", 0), ("synthetic/type", 1), ("synthetic/type", 2)):
        env = make("synthetic", screen=(270, 585), seed=seed)
        try:
            obs = env.reset(task, seed=seed)
            out.append(obs)
            box = obs.elements[0]
            tap = Action.tap(*obs.to_normalised(*box.center))
            out.append(with_previous_actions(env.step(tap).observation, [tap]))
        finally:
            env.close()
    return out


def scored_actions(obs: Observation) -> list[Action]:
    """Actions every committed agent can express on ``obs``: taps on element centres, a
    typed instruction word."""
    taps = [Action.tap(*obs.to_normalised(*e.center)) for e in obs.elements[:2]]
    return [*taps, Action.type_text(obs.instruction.split()[1])]


def record_agents() -> dict[str, Any]:
    from devicerl.agents.small import SmallAgent

    torch.set_num_threads(1)
    observations = agent_observations()
    agents = {}
    for name in AGENTS:
        agent = SmallAgent.from_pretrained(ROOT / "benchmarks" / "agents" / name)
        greedy = agent.act(observations, greedy=True)
        rows = []
        for obs, sample in zip(observations, greedy):
            actions = scored_actions(obs)
            with torch.no_grad():
                lp = agent.log_prob([obs] * len(actions), actions).tolist()
                raw = agent.log_prob([obs] * len(actions), actions, floor=False).tolist()
            rows.append(
                {
                    "greedy": sample.action.to_json(),
                    "greedy_log_prob": sample.log_prob,
                    "actions": [a.to_json() for a in actions],
                    "log_probs": lp,
                    "log_probs_no_floor": raw,
                }
            )
        agents[name] = rows
    return {"commit": commit(), "agents": agents}


def main() -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    recorders = {"actions": record_actions, "store": record_store, "agents": record_agents}
    for name, fn in recorders.items():
        data = fn()
        text = json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
        (FIXTURES / f"{name}.json").write_text(text, encoding="utf-8")
        print(f"wrote {name}")


if __name__ == "__main__":
    main()
