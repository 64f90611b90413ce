"""Small real agents and observations for the league tests."""

from __future__ import annotations

from devicerl.agents.factory import AgentSpec
from devicerl.agents.small.config import SmallAgentOptions
from devicerl.envs import make
from devicerl.league.config import PolicySpec
from devicerl.records import Observation


def tiny_spec(tasks: str = "*", seed: int = 0, **kwargs) -> PolicySpec:
    """A policy spec with a small agent small enough to build in milliseconds."""
    small = SmallAgentOptions(d_model=32)
    return PolicySpec(agent=AgentSpec(kind="small", seed=seed, small=small), tasks=tasks, **kwargs)


def observations(n: int = 4) -> list[Observation]:
    env = make("synthetic/tap", n_boxes=4)
    return [env.reset(seed=s) for s in range(n)]


def nudge(policy, scale: float = 0.01) -> None:
    """One fake 'update': add ``scale`` to every trainable weight (in place, like an optimiser)."""
    import torch

    with torch.no_grad():
        for p in policy.parameters():
            p.add_(scale)
