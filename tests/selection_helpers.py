"""DigiRL with fixed critics, and trajectories whose observations carry the step critic's value:
what the selection tests (and the benchmark tests that audit a selection) compute by hand."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from devicerl.actions import Action
from devicerl.agents.small import SmallAgent
from devicerl.algos.base import usable
from devicerl.algos.config import ActorConfig, CriticConfig, DigiRLConfig
from devicerl.algos.digirl import DigiRL
from devicerl.algos.selection import Selection, run_steps
from devicerl.records import EndReason, Observation, Step, Trajectory


class FixedCritic:
    """A critic whose values are given: V read from the observation."""

    def __init__(self, value: Callable[[Observation], float]) -> None:
        self.value = value

    def values(self, observations: Sequence[Observation]) -> torch.Tensor:
        return torch.tensor([self.value(o) for o in observations], dtype=torch.float32)


def trajectory(name: str, values: list[float], success: bool, max_steps: int) -> Trajectory:
    """Steps whose observations carry the step critic's value; the last step solves it when
    `success`."""
    t = Trajectory(task=f"t/{name}", instruction=name, max_steps=max_steps)
    for i, v in enumerate(values):
        obs = Observation(instruction=name, screen_size=(1, 1), step=i, extras={"v": v})
        last = i == len(values) - 1
        reward = 1.0 if success and last else 0.0
        t.steps.append(Step(obs, Action.tap(0.5, 0.5), reward=reward, terminated=last))
    return t.end(EndReason.SUCCESS if success else EndReason.FAILURE, success=success)


#: V_instr of each instruction under the fixed instruction critic.
V_INSTR = {"a": 0.3, "b": 0.1, "c": 0.8, "d": 0.6, "e": 0.5, "f": 0.5}


def learner(selection: Sequence[str] = ("curriculum", "step_filter"), **options: Any) -> DigiRL:
    """DigiRL with the given selection steps and `DigiRLConfig` options; its critics read
    V_instr from `V_INSTR` and V(s) from the observation's ``extras["v"]``."""
    config = DigiRLConfig(selection=list(selection), **options)  # type: ignore[arg-type]
    config.validate()
    rl = DigiRL(SmallAgent(seed=0), config, ActorConfig(), CriticConfig(), seed=0)
    rl.critics.instr = FixedCritic(lambda o: V_INSTR[o.instruction])  # type: ignore[assignment]
    rl.critics.step = FixedCritic(lambda o: o.extras["v"])  # type: ignore[assignment]
    return rl


def select(rl: Any, data: Sequence[Trajectory]) -> Selection:
    """What one update of ``rl`` hands the actor from ``data``: its selection steps run over
    the usable trajectories."""
    return run_steps(rl.selection, usable(data))
