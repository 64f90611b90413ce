"""DigiRL's critics as a learner part: fitting them, and the values the selection reads.

- The instruction critic V_instr(c) learns P(success | instruction) (cross-entropy, eq. 4.2).
- The step critic V(s_h, c) (two heads, value = their minimum) learns P(success | state) by
  cross-entropy against the trajectory's success (eq. 4.4).

About 1 in `HELDOUT_EVERY` trajectories (by a hash of the episode id, so each stays on its side
for good) is held out of critic training; the critics are scored on that slice every iteration
(the step critic's Brier score and accuracy, the instruction critic's ROC AUC).
"""

from __future__ import annotations

import math
import random
import zlib
from collections.abc import Sequence

import torch
from torch import nn

from devicerl.agents.base import Policy
from devicerl.agents.critics import InstructionCritic, StepCritic, critic_config_from
from devicerl.algos.config import CriticConfig
from devicerl.algos.formulas import two_head_bce, value_bce
from devicerl.algos.grad_sync import GradSync
from devicerl.records import Trajectory

#: One trajectory in this many is held out of critic training, to score the critics on.
HELDOUT_EVERY = 10
#: Gradient-norm clip of the critics' updates (a guard against spikes: Adam's step size does
#: not scale with the gradient norm).
GRAD_CLIP = 1.0


class Critics:
    """The two critics, their optimizers and their fitting (see the module doc)."""

    def __init__(
        self,
        actor: Policy,
        config: CriticConfig,
        rng: random.Random,
        grad_sync: GradSync,
        seed: int = 0,
    ) -> None:
        net = critic_config_from(
            getattr(actor, "config", None) if hasattr(actor, "featurizer") else None,
            d_model=config.d_model,
            n_layers=2,
            d_ff=2 * config.d_model,
            seed=seed,
        )
        device = getattr(actor, "device", torch.device("cpu"))
        self.config = config
        self.rng = rng
        self.grad_sync = grad_sync
        self.instr = InstructionCritic(net).to(device)
        self.step = StepCritic(net).to(device)
        self.instr_opt = torch.optim.AdamW(self.instr.parameters(), lr=config.lr)
        self.step_opt = torch.optim.AdamW(self.step.parameters(), lr=config.lr)

    def modules(self) -> dict[str, nn.Module]:
        return {"instr_critic": self.instr, "step_critic": self.step}

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"instr_critic": self.instr_opt, "step_critic": self.step_opt}

    # -- the values the selection reads --------------------------------------------------------
    def instruction_values(self, data: Sequence[Trajectory]) -> torch.Tensor:
        return self.instr.values([t.steps[0].observation for t in data])

    def step_values(self, trajectories: Sequence[Trajectory]) -> list[torch.Tensor]:
        """Every step's value, scored in one batch across the trajectories."""
        values = self.step.values([s.observation for t in trajectories for s in t.steps])
        out, offset = [], 0
        for t in trajectories:
            out.append(values[offset : offset + t.length])
            offset += t.length
        return out

    # -- fitting -------------------------------------------------------------------------------
    def step_once(self, data: Sequence[Trajectory]) -> dict[str, float]:
        """One iteration: fit both critics on the trajectories not held out, then score them
        on the held-out slice."""
        train, heldout = split_heldout(data)
        return {**self.fit(train or data), **self.diagnostics(heldout)}

    def fit(
        self,
        data: Sequence[Trajectory],
        instruction_updates: int | None = None,
        step_updates: int | None = None,
    ) -> dict[str, float]:
        """Minibatch updates of the instruction critic, then of the step critic (each
        ``config.updates`` unless given)."""
        cc = self.config
        instr_losses, step_losses = [], []
        self.instr.train()
        self.step.train()
        for _ in range(cc.updates if instruction_updates is None else instruction_updates):
            batch = self.grad_sync.shard([self.rng.choice(data) for _ in range(cc.batch_size)])
            logits = self.instr([t.steps[0].observation for t in batch]).squeeze(-1)
            target = torch.tensor([float(t.success) for t in batch], device=logits.device)
            instr_losses.append(self._fit(self.instr, self.instr_opt, value_bce(logits, target)))
        steps = [(t, i) for t in data for i in range(t.length)]
        for _ in range(cc.updates if step_updates is None else step_updates):
            batch = self.grad_sync.shard([self.rng.choice(steps) for _ in range(cc.batch_size)])
            logits = self.step([t.steps[i].observation for t, i in batch])
            target = torch.tensor([float(t.success) for t, _ in batch], device=logits.device)
            step_losses.append(self._fit(self.step, self.step_opt, two_head_bce(logits, target)))
        self.instr.eval()
        self.step.eval()
        return {
            "train/instr_critic_loss": sum(instr_losses) / max(1, len(instr_losses)),
            "train/step_critic_loss": sum(step_losses) / max(1, len(step_losses)),
        }

    def _fit(self, critic: nn.Module, opt: torch.optim.Optimizer, loss: torch.Tensor) -> float:
        opt.zero_grad(set_to_none=True)
        loss.backward()
        self.grad_sync.sync(critic.parameters())
        nn.utils.clip_grad_norm_(critic.parameters(), GRAD_CLIP)
        opt.step()
        return loss.item()

    def diagnostics(self, heldout: Sequence[Trajectory], limit: int = 64) -> dict[str, float]:
        """The critics on the newest ``limit`` held-out trajectories: the step critic's Brier
        score and accuracy (every step against its episode's success), the instruction critic's
        ROC AUC (nan until both outcomes were held out)."""
        held = list(heldout)[-limit:]
        if not held:
            return {}
        labels = [1.0 if t.success else 0.0 for t in held for _ in t.steps]
        v = self.step.values([s.observation for t in held for s in t.steps])
        y = torch.tensor(labels)
        return {
            "train/critic_brier": float(((v - y) ** 2).mean()),
            "train/critic_accuracy": float(((v > 0.5).float() == y).float().mean()),
            "train/instr_critic_auc": roc_auc(
                self.instruction_values(held), [t.success for t in held]
            ),
            "train/critic_heldout": float(len(held)),
        }


def split_heldout(data: Sequence[Trajectory]) -> tuple[list[Trajectory], list[Trajectory]]:
    """(critic training data, held-out slice), by a hash of each episode id."""
    train, heldout = [], []
    for t in data:
        (heldout if zlib.crc32(t.episode_id.encode()) % HELDOUT_EVERY == 0 else train).append(t)
    return train, heldout


def roc_auc(scores: torch.Tensor, labels: Sequence[bool]) -> float:
    """ROC AUC of `scores` for `labels` (ties count half); nan without both classes."""
    pos = [float(s) for s, y in zip(scores.tolist(), labels) if y]
    neg = [float(s) for s, y in zip(scores.tolist(), labels) if not y]
    if not pos or not neg:
        return math.nan
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))
