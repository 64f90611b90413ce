"""Write the kept-agents fixture: ``python -m tests.small_kept.record`` from the repository root.

Runs real episodes on headless Chromium: on the web-skills pages, one episode of the committed
web-skills agent (sampling, seeded) and one of the pages' plan (`PlanOracle`) per page; on the
web-skills-reach pages, the same with the committed reach agent, screenshots kept. Their
observations (as the agent saw them, with the episode's earlier actions) make the two
observation sets; every agent of `kept.AGENTS` is then asked about its set (`kept.what_it_makes`)
and the answers are written to ``fixtures/`` with the commit they were recorded at.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import torch

from devicerl.agents.scripted import PlanOracle
from devicerl.envs import make
from devicerl.runtime.acting.rollout import rollout
from devicerl.tasks.webskills import FAMILIES, REACH_FAMILIES

from . import kept

#: Observations kept per episode (its first ones): enough screens of every page, a small file.
PER_EPISODE = 3


def _episodes(agent: Any, suite: str, families: dict[str, int], screenshot: bool) -> list[Any]:
    env = make("browser", screenshot=screenshot)
    seen = []
    try:
        for k, name in enumerate(families):
            agent.generator.manual_seed(k)
            for policy in (agent, PlanOracle()):
                t = rollout(env, policy, f"{suite}/{name}", seed=k)
                for i, step in enumerate(t.steps[:PER_EPISODE]):
                    seen.append((t.agent_observation(i, step.observation), step.action))
    finally:
        env.close()
    return seen


def main() -> int:
    torch.set_num_threads(1)
    kept.FIXTURES.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=kept.ROOT, check=True
    ).stdout.strip()
    sets = {
        "web": _episodes(kept.build("webskills"), "webskills", FAMILIES, False),
        "reach": _episodes(kept.build("webskills-reach"), "webskills-reach", REACH_FAMILIES, True),
    }
    for set_name, episodes in sets.items():
        observations = [o for o, _ in episodes]
        pairs = [(i, a) for i, (_, a) in enumerate(episodes)]
        pairs += [(i, a) for i, o in enumerate(observations) for a in kept.other_actions(o)]
        data = {
            "commit": commit,
            "observations": [kept.observation_record(o, set_name == "reach") for o in observations],
            "pairs": [[i, a.to_dict()] for i, a in pairs],
        }
        (kept.FIXTURES / f"observations-{set_name}.json").write_text(json.dumps(data) + "\n")
        print(f"{set_name}: {len(observations)} observations, {len(pairs)} actions")
    for name, (set_name, _) in kept.AGENTS.items():
        data = json.loads((kept.FIXTURES / f"observations-{set_name}.json").read_text())
        observations = [kept.observation(d) for d in data["observations"]]
        pairs = [(i, kept.Action.from_dict(a)) for i, a in data["pairs"]]
        result = {"commit": commit, **kept.what_it_makes(kept.build(name), observations, pairs)}
        (kept.FIXTURES / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
        print(f"{name}: recorded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
