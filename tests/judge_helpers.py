"""Shared helpers for the judge tests: real synthetic episodes and a verdict-scripting server."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import numpy as np

from devicerl.actions import Action
from devicerl.agents.base import FunctionPolicy
from devicerl.clients import ChatConfig
from devicerl.envs import make
from devicerl.judges import is_labelled
from devicerl.records import Observation, Trajectory
from devicerl.runtime.acting.rollout import rollout
from devicerl.testing.chat_server import Reply


def oracle(obs: Observation, rng: np.random.Generator, skill: float) -> Action:
    """Taps the box the instruction names with probability ``skill``, else another box; on
    ``type`` tasks then types the word into whichever box it focused."""
    m = re.search(r"labelled (\w+)", obs.instruction)
    target = m.group(1) if m else ""
    word = re.match(r"Type (\w+) into", obs.instruction)
    if word and any(e.focused for e in obs.elements):
        return Action.type_text(word.group(1))
    right = [e for e in obs.elements if e.text == target]
    wrong = [e for e in obs.elements if e.text != target]
    pick = right[0] if (rng.random() < skill and right) or not wrong else wrong[0]
    return Action.tap(*obs.to_normalised(*pick.center))


def collect(
    n: int,
    task: str = "synthetic/tap",
    skill: float = 0.5,
    seed: int = 0,
    policy: Callable[[Observation, np.random.Generator], Action] | None = None,
    **env_kw,
) -> list[Trajectory]:
    """``n`` real episodes on the synthetic device, with its ground-truth success."""
    env = make("synthetic", seed=seed, **env_kw)
    rng = np.random.default_rng(seed)
    act = policy or (lambda obs, rng: oracle(obs, rng, skill))
    agent = FunctionPolicy(lambda observations: [act(o, rng) for o in observations])
    out = [rollout(env, agent, task, seed * 1000 + i) for i in range(n)]
    env.close()
    return out


def query(body: dict) -> tuple[str, int, int]:
    """(instruction, number of actions, number of images) of the judged (last) user turn."""
    last = body["messages"][-1]["content"]
    text = last[0]["text"]
    instruction = re.search(r"^Task: (.*)$", text, re.M).group(1)
    n_actions = len(re.findall(r"^\d+\. ", text, re.M))
    n_images = sum(p["type"] == "image_url" for p in last)
    return instruction, n_actions, n_images


def verdict_text(success: bool, why: str = "scripted") -> str:
    return f"Rationale: {why}.\nVerdict: {'SUCCESS' if success else 'FAILURE'}"


def by_instruction(labels: dict[str, bool | str]) -> Callable[[dict], Reply]:
    """A responder answering from ``labels[instruction]`` (a bool, or "garbage" for junk)."""

    def respond(body: dict) -> Reply:
        label = labels.get(query(body)[0], "garbage")
        if label == "garbage":
            return Reply("I am not sure what to say here.")
        return Reply(verdict_text(bool(label)))

    return respond


def chat_config(base_url: str, **kw) -> ChatConfig:
    kw.setdefault("model", "judge-model")
    return ChatConfig(base_url=base_url, **kw)


def labelled(episodes: Iterable[Trajectory], n: int) -> list[Trajectory]:
    """Episodes from ``episodes`` until ``n`` complete, labelled ones came (all of them, the
    truncated and unlabelled ones too)."""
    out: list[Trajectory] = []
    for t in episodes:
        out.append(t)
        if sum(not x.is_truncated and is_labelled(x) for x in out) >= n:
            break
    return out
