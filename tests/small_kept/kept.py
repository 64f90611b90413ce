"""What the kept-agents fixture holds and how it is computed, shared by ``record.py`` (which writes
it) and ``tests/test_small_agent_kept.py`` (which checks an agent built now against it).

Observations come from real episodes on headless Chromium (``record.py``) and are stored as
JSON: elements as their fields, previous actions as action records, screenshots as PNG
(lossless, so pixel features see the same input). Agents: the three committed web-skills agents
(``benchmarks/agents/``) and two fresh seeded ones built from run options (their weights come
from the seed, so they pin the order in which the network's parts are built). Only the public
agent API is used: `SmallAgent.from_pretrained`, `act`, `log_prob`, `entropy`, ``generator``.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from devicerl.actions import Action
from devicerl.data.codec import decode_image, encode_image
from devicerl.records import Observation, UIElement

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAVED = ROOT / "benchmarks" / "agents"
#: Sampling generator seed of the recorded sampled actions.
SAMPLE_SEED = 1234
#: A raised exploration floor, as a collector asks for it.
RAISED = 0.5


def _fresh_default() -> Any:
    from devicerl.agents.small.config import SmallAgentOptions

    return SmallAgentOptions(d_model=64).architecture(seed=0)


def _fresh_all_parts() -> Any:
    from devicerl.agents.small.config import SmallAgentOptions

    options = SmallAgentOptions(
        d_model=64,
        heads=("swipes", "points", "page_text", "free_text"),
        inputs=("pixels", "field_labels"),
        cell_attention="gated",
    )
    cfg = options.architecture(seed=3)
    features = dataclasses.replace(cfg.features, instr_positions="relative")
    return dataclasses.replace(cfg, features=features, grid=(4, 4), offsets=3)


#: agent name -> (observation set, saved folder or a function building a fresh config)
AGENTS: dict[str, tuple[str, Path | Callable[[], Any]]] = {
    "webskills": ("web", SAVED / "webskills-2026-11-27"),
    "webskills-labels": ("web", SAVED / "webskills-labels-2026-11-27"),
    "webskills-reach": ("reach", SAVED / "webskills-reach-2026-11-27"),
    "fresh-default": ("web", _fresh_default),
    "fresh-all-parts": ("reach", _fresh_all_parts),
}


def build(name: str) -> Any:
    from devicerl.agents.small import SmallAgent

    _, source = AGENTS[name]
    if isinstance(source, Path):
        return SmallAgent.from_pretrained(source)
    return SmallAgent(source())


# -- observations as JSON -------------------------------------------------------------------------
def observation_record(obs: Observation, screenshot: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "instruction": obs.instruction,
        "screen_size": list(obs.screen_size),
        "elements": [
            {**dataclasses.asdict(e), "bbox": list(e.bbox), "attrs": dict(e.attrs)}
            for e in obs.elements
        ],
        "previous_actions": [a.to_dict() for a in obs.previous_actions],
    }
    if screenshot and obs.screenshot is not None:
        out["screenshot"] = base64.b64encode(encode_image(obs.screenshot, "png")).decode()
    return out


def observation(d: dict[str, Any]) -> Observation:
    shot = d.get("screenshot")
    return Observation(
        d["instruction"],
        tuple(d["screen_size"]),
        screenshot=None
        if shot is None
        else np.ascontiguousarray(decode_image(base64.b64decode(shot))),
        elements=[UIElement(**{**e, "bbox": tuple(e["bbox"])}) for e in d["elements"]],
        previous_actions=tuple(Action.from_dict(a) for a in d["previous_actions"]),
    )


def other_actions(obs: Observation) -> list[Action]:
    """Actions of every kind the small agent's parts score, many not its own: taps on an
    element's centre and between points, fixed and free swipes, typed text from the instruction,
    the page and nowhere, the other types, an invalid action."""
    words = obs.instruction.split()
    texts = [e.text for e in obs.elements if e.text.strip()]
    out = [
        Action.tap(0.301, 0.777),
        Action.swipe(0.5, 0.65, 0.5, 0.35),  # the agent's own swipe up
        Action.swipe(0.2, 0.9, 0.25, 0.1),
        Action.swipe(0.0625, 0.0625, 0.9375, 0.5625),
        Action.type_text("BLUE sky 42"),
        Action.type_text("ünïcode"),
        Action.enter(),
        Action.back(),
        Action.home(),
        Action.complete(),
        Action.impossible(),
        Action.invalid("junk", "unparsable"),
    ]
    if obs.elements:
        out.append(Action.tap(*obs.to_normalised(*obs.elements[0].center)))
        out.append(Action.tap(*obs.to_normalised(*obs.elements[-1].center)))
    if words:
        out += [Action.type_text(words[0]), Action.type_text(" ".join(words[-2:]))]
    if texts:
        out.append(Action.type_text(texts[0].split()[-1]))
    return out


# -- what an agent makes of them ------------------------------------------------------------------
def _samples(samples: list[Any]) -> dict[str, Any]:
    return {
        "actions": [s.action.to_dict() for s in samples],
        "log_probs": [float(s.log_prob) for s in samples],
        "extras": [
            {k: v if not isinstance(v, tuple) else list(v) for k, v in s.extras.items()}
            for s in samples
        ],
    }


def what_it_makes(
    agent: Any, observations: list[Observation], pairs: list[tuple[int, Action]]
) -> dict[str, Any]:
    """Log-probs of ``pairs`` (observation index, action) with the agent's floor, without it and
    at a raised floor; the entropy of each observation; greedy actions; sampled actions from a
    seeded generator, at the agent's floor and at the raised one."""
    obs = [observations[i] for i, _ in pairs]
    actions = [a for _, a in pairs]
    n = len(observations)
    with torch.no_grad():
        out = {
            "log_prob": agent.log_prob(obs, actions).tolist(),
            "log_prob_no_floor": agent.log_prob(obs, actions, floor=False).tolist(),
            "log_prob_raised": agent.log_prob(obs, actions, epsilon=[RAISED] * len(obs)).tolist(),
            "entropy": agent.entropy(observations).tolist(),
            "greedy": _samples(agent.act(observations, greedy=True)),
        }
        agent.generator.manual_seed(SAMPLE_SEED)
        out["sampled"] = _samples(agent.act(observations))
        agent.generator.manual_seed(SAMPLE_SEED)
        out["sampled_raised"] = _samples(agent.act(observations, epsilon=[RAISED] * n))
    return out
