"""DigiRL (Bai, Zhou et al., 2024) as in the paper: losses and updates only.

Per iteration, from the replay buffer:
1. the instruction critic V_instr(c) learns P(success | instruction) (cross-entropy);
2. the step critic V(s_h, c) (two heads, value = their minimum) learns P(success | state)
   (cross-entropy against the trajectory's success, or optionally its MC return);
3. on a sample of trajectories, the curriculum keeps the top-p by A_instr = r_H - V_instr(c),
   then the step filter keeps the actions of those trajectories whose
   A_step = lam^(H-h) r_H + (1 - lam^(H-h) r_H) (V(s_{h+1}) + r_h - V(s_h)) exceeds 1/H;
4. the actor maximises the log-likelihood of the kept actions.
The formulas live in `devicerl.algos.formulas` (with the conventions for H and terminal values).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from devicerl.agents.base import Policy
from devicerl.agents.critics import InstructionCritic, StepCritic, critic_config_from
from devicerl.algos.base import Learner, Sample, horizon, usable
from devicerl.algos.config import CriticConfig as CriticConfig  # re-export
from devicerl.algos.config import DigiRLConfig
from devicerl.algos.formulas import (
    curriculum_mask,
    instruction_advantages,
    keep_steps,
    mc_returns,
    step_advantages,
    two_head_bce,
    value_bce,
)
from devicerl.records import Trajectory


class DigiRL(Learner):
    """The DigiRL learner: two critics and an advantage-filtered actor."""

    name = "digirl"

    def __init__(self, actor: Policy, config: DigiRLConfig, seed: int = 0) -> None:
        super().__init__(actor, config.actor, seed)
        self.config = config
        cc = config.critic
        critic_cfg = critic_config_from(
            getattr(actor, "config", None) if hasattr(actor, "featurizer") else None,
            d_model=cc.d_model,
            n_layers=cc.n_layers,
            d_ff=2 * cc.d_model,
            seed=seed,
        )
        device = getattr(actor, "device", torch.device("cpu"))
        self.instr_critic = InstructionCritic(critic_cfg).to(device)
        self.step_critic = StepCritic(critic_cfg).to(device)
        self.instr_opt = torch.optim.AdamW(self.instr_critic.parameters(), lr=cc.lr)
        self.step_opt = torch.optim.AdamW(self.step_critic.parameters(), lr=cc.lr)

    def modules(self) -> dict[str, nn.Module]:
        return {"instr_critic": self.instr_critic, "step_critic": self.step_critic}

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {
            "actor": self.actor_opt,
            "instr_critic": self.instr_opt,
            "step_critic": self.step_opt,
        }

    # -- one iteration ----------------------------------------------------------------------
    def update(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        data = usable(trajectories)
        if not data:
            return {"train/data_trajectories": 0.0}
        metrics = {"train/data_trajectories": float(len(data))}
        metrics.update(self.critic_step(data))
        samples, stats = self.select(data)
        metrics.update(stats)
        metrics.update(self.actor_step(samples, data))
        return metrics

    # -- critics -------------------------------------------------------------------------------
    def _fit(self, critic: nn.Module, opt: torch.optim.Optimizer, loss: torch.Tensor) -> float:
        opt.zero_grad(set_to_none=True)
        loss.backward()
        self.grad_sync.sync(critic.parameters())
        if self.config.critic.grad_clip > 0:
            nn.utils.clip_grad_norm_(critic.parameters(), self.config.critic.grad_clip)
        opt.step()
        return loss.item()

    def step_target(self, t: Trajectory, index: int) -> float:
        success = 1.0 if t.success else 0.0
        if self.config.step_value_target == "success":
            return success
        rewards = torch.tensor([s.reward for s in t.steps], dtype=torch.float32)
        return float(mc_returns(rewards, self.config.gamma)[index])

    def critic_step(self, data: Sequence[Trajectory]) -> dict[str, float]:
        cc = self.config.critic
        instr_losses, step_losses = [], []
        self.instr_critic.train()
        self.step_critic.train()
        for _ in range(cc.instruction_updates):
            batch = self.grad_sync.shard([self.rng.choice(data) for _ in range(cc.batch_size)])
            logits = self.instr_critic([t.steps[0].observation for t in batch]).squeeze(-1)
            target = torch.tensor([float(t.success) for t in batch], device=logits.device)
            instr_losses.append(
                self._fit(self.instr_critic, self.instr_opt, value_bce(logits, target))
            )
        steps = [(t, i) for t in data for i in range(t.length)]
        for _ in range(cc.step_updates):
            batch = self.grad_sync.shard([self.rng.choice(steps) for _ in range(cc.batch_size)])
            logits = self.step_critic([t.steps[i].observation for t, i in batch])
            target = torch.tensor([self.step_target(t, i) for t, i in batch], device=logits.device)
            step_losses.append(
                self._fit(self.step_critic, self.step_opt, two_head_bce(logits, target))
            )
        self.instr_critic.eval()
        self.step_critic.eval()
        return {
            "train/instr_critic_loss": sum(instr_losses) / max(1, len(instr_losses)),
            "train/step_critic_loss": sum(step_losses) / max(1, len(step_losses)),
        }

    # -- filters -------------------------------------------------------------------------------
    def select(self, data: Sequence[Trajectory]) -> tuple[list[Sample], dict[str, float]]:
        """The curriculum, then the step filter: the actions the actor will imitate."""
        n = min(len(data), self.config.advantage_sample)
        pool = self.rng.sample(list(data), n)
        final = torch.tensor([1.0 if t.success else 0.0 for t in pool])
        v_instr = self.instr_critic.values([t.steps[0].observation for t in pool])
        a_instr = instruction_advantages(final, v_instr)
        kept_traj = [t for t, k in zip(pool, curriculum_mask(a_instr, self.config.top_p)) if k]
        samples: list[Sample] = []
        all_adv = []
        if kept_traj:
            values = self.step_critic.values([s.observation for t in kept_traj for s in t.steps])
            offset = 0
            for t in kept_traj:
                v = values[offset : offset + t.length]
                offset += t.length
                nxt = torch.cat([v[1:], torch.zeros(1)])
                rewards = torch.tensor([s.reward for s in t.steps], dtype=torch.float32)
                adv = step_advantages(v, nxt, rewards, 1.0 if t.success else 0.0, self.config.lam)
                all_adv.append(adv)
                keep = keep_steps(adv, horizon(t))
                samples.extend(Sample(t, i) for i in range(t.length) if keep[i])
        adv_cat = torch.cat(all_adv) if all_adv else torch.zeros(0)
        return samples, {
            "train/v_instr_mean": float(v_instr.mean()),
            "train/a_instr_mean": float(a_instr.mean()),
            "train/kept_trajectories": float(len(kept_traj)),
            "train/kept_steps": float(len(samples)),
            "train/a_step_mean": float(adv_cat.mean()) if adv_cat.numel() else 0.0,
        }
