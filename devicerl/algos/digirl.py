"""DigiRL (Bai, Zhou et al., 2024, arXiv 2406.11896) as in the paper, one iteration at a time.

From the replay buffer's usable trajectories (steps h = 1..H, sparse reward r_H in {0, 1}):

1. the critics learn (`devicerl.algos.critic_fit.Critics`): the instruction critic
   V_instr(c) = P(success | c), the step critic V(s_h, c) = P(success | s_h, c), both by
   cross-entropy against the trajectory's success (eqs. 4.2, 4.4);
2. the curriculum keeps the top-p trajectories by A_instr = r_H - V_instr(c) (eq. 4.3);
3. the step filter keeps the actions of those trajectories whose
   A_step = lam^(H-h) r_H + (1 - lam^(H-h) r_H) (V(s_{h+1}) + r_h - V(s_h))
   exceeds 1/H (eqs. 4.5, 4.6);
4. the actor maximises log pi(a_h | s_h, c) over the kept actions (`Regression`).

The formulas are `devicerl.algos.formulas` (with the conventions for H and terminal values).
``critic_warmup`` iterations train only the critics first (the offline and off-to-online setups
use it, as the reference does). ``selection`` lists the selection steps (`DigiRLConfig`): the
paper's [curriculum, step_filter], with the additions `Rehearsal` (solved tasks' successes join
the curriculum's picks) and `SkipNoops` (no-op steps are never imitated).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from devicerl.agents.base import Policy
from devicerl.algos.base import Learner, usable
from devicerl.algos.config import ActorConfig, CriticConfig, DigiRLConfig
from devicerl.algos.critic_fit import Critics
from devicerl.algos.regression import Regression
from devicerl.algos.selection import (
    Curriculum,
    EveryStep,
    EveryTrajectory,
    Rehearsal,
    SkipNoops,
    StepFilter,
    run_steps,
)
from devicerl.records import Trajectory


class DigiRL(Learner):
    """The DigiRL learner: two critics and an advantage-filtered actor."""

    name = "digirl"

    def __init__(
        self,
        actor: Policy,
        config: DigiRLConfig,
        actor_config: ActorConfig,
        critic_config: CriticConfig,
        seed: int = 0,
    ) -> None:
        super().__init__(actor, seed)
        self.config = config
        self.regression = Regression(actor, actor_config, self.rng, self.grad_sync)
        self.critics = Critics(actor, critic_config, self.rng, self.grad_sync, seed=seed)
        steps = {
            "curriculum": Curriculum(config.top_p, self.critics),
            "rehearsal": Rehearsal(config.rehearsal, self.rng),
            "step_filter": StepFilter(config.lam, self.critics),
            "skip_noops": SkipNoops(),
        }
        names = list(config.selection)
        # without a curriculum every trajectory goes on; without a step filter every step of
        # the chosen trajectories is imitated (before no-op steps are skipped)
        self.selection: list[Any] = [] if "curriculum" in names else [EveryTrajectory()]
        for name in names:
            if name == "skip_noops" and "step_filter" not in names:
                self.selection.append(EveryStep())
            self.selection.append(steps[name])
        if "step_filter" not in names and "skip_noops" not in names:
            self.selection.append(EveryStep())
        self.iterations = 0

    def parts(self) -> list[Any]:
        return [self.regression, self.critics]

    def modules(self) -> dict[str, nn.Module]:
        return self.critics.modules()

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"actor": self.regression.optimizer, **self.critics.optimizers()}

    def update(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        data = usable(trajectories)
        if not data:
            return {"train/data_trajectories": 0.0}
        metrics = {"train/data_trajectories": float(len(data)), **self.critics.step_once(data)}
        self.iterations += 1
        if self.iterations <= self.config.critic_warmup:
            return {**metrics, "train/critic_warmup": 1.0}
        sel = run_steps(self.selection, data)
        metrics.update(sel.stats)
        metrics.update(self.regression.step(sel.samples, data))
        self.updates_done += int(metrics.get("train/actor_updates", 0))
        return metrics

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "iterations": self.iterations}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.iterations = int(state.get("iterations", 0))
