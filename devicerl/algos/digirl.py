"""DigiRL (Bai, Zhou et al., 2024) as in the paper: losses and updates only.

Per iteration, from the replay buffer:
1. the instruction critic V_instr(c) learns P(success | instruction) (cross-entropy);
2. the step critic V(s_h, c) (two heads, value = their minimum) learns P(success | state)
   (cross-entropy against the trajectory's success, or optionally its MC return);
3. over the replay's trajectories (as the reference; ``advantage_sample`` = N > 0 ranks a random
   N of them), the curriculum keeps the top-p by A_instr = r_H - V_instr(c),
   then the step filter keeps the actions of those trajectories whose
   A_step = lam^(H-h) r_H + (1 - lam^(H-h) r_H) (V(s_{h+1}) + r_h - V(s_h)) exceeds 1/H;
4. the actor maximises the log-likelihood of the kept actions.
The formulas live in `devicerl.algos.formulas` (with the conventions for H and terminal values).

Ablation switches (`DigiRLConfig`): ``step_filter=false`` imitates every step of the
curriculum's trajectories; ``curriculum=false`` sends every sampled trajectory to the step
filter; ``critics=false`` trains no critic and keeps the top-p trajectories by return with all
their steps (Filtered BC). ``critic_warmup`` iterations train only the critics first (the
offline and off-to-online configs use it, as the reference does). ``rehearse`` = N > 0 (an
addition, off by default) adds to the curriculum, per task in the ranked trajectories, its N
successes with the highest A_instr (``rehearse_pick=random``: a fresh uniform draw of them each
iteration), so a solved task keeps being imitated (``rehearse_share`` = f: at least a share f
of each task's successes, so a task with many instructions keeps them all in view;
``rehearse_weight`` = w: a minibatch draws a success the curriculum did not pick itself w times
as often as a picked step, so a large rehearsal does not crowd out what the curriculum chose);
with ``rehearse_whole`` (an addition, off by default) every step of them, past the step filter.
``keep_demonstration_steps`` (an addition, off by default) lets every step of a demonstration
(``extras["demonstration"]``) past the step filter: a step critic that cannot tell a
demonstration's states apart gives A_step = lam^(H-h), which drops the first steps of every
long one (benchmarks/filter_audit.py measures this on a run).

Diagnostics, every iteration: the share of steps the step filter keeps (and the share of the
kept successes' steps it drops), the share of trajectories the curriculum keeps, how far the
step critic's values spread within a kept trajectory (max - min), and the critics on a held-out
slice of trajectories (about 1 in ``heldout_every``, by episode id, never trained on by the
critics): the step critic's Brier score and accuracy against the episode's success, the
instruction critic's ROC AUC.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from devicerl.agents.base import Policy
from devicerl.agents.critics import InstructionCritic, StepCritic, critic_config_from
from devicerl.algos.base import Learner, Sample, every_step, horizon, top_p_by_return, usable
from devicerl.algos.config import CriticConfig as CriticConfig  # re-export
from devicerl.algos.config import DigiRLConfig
from devicerl.algos.formulas import (
    curriculum_mask,
    instruction_advantages,
    keep_steps,
    mc_returns,
    rehearsal_mask,
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
        self.iterations = 0

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
        if self.config.critics:
            train, heldout = self.split_heldout(data)
            metrics.update(self.critic_step(train or data))
            metrics.update(self.critic_diagnostics(heldout))
        self.iterations += 1
        if self.iterations <= self.config.critic_warmup:
            metrics["train/critic_warmup"] = 1.0
            return metrics
        samples, stats = self.select(data)
        metrics.update(stats)
        metrics.update(self.actor_step(samples, data))
        return metrics

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "iterations": self.iterations}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.iterations = int(state.get("iterations", 0))

    # -- held-out slice ------------------------------------------------------------------------
    def split_heldout(
        self, data: Sequence[Trajectory]
    ) -> tuple[list[Trajectory], list[Trajectory]]:
        """(critic training data, held-out slice): about 1 in ``heldout_every`` trajectories,
        chosen by a hash of the episode id, so a trajectory stays on its side for good."""
        n = self.config.heldout_every
        if n <= 1:
            return list(data), []
        train, heldout = [], []
        for t in data:
            (heldout if zlib.crc32(t.episode_id.encode()) % n == 0 else train).append(t)
        return train, heldout

    def critic_diagnostics(
        self, heldout: Sequence[Trajectory], limit: int = 64
    ) -> dict[str, float]:
        """The critics on held-out trajectories (the newest `limit`): step critic's Brier
        score and accuracy (every step against its episode's success), instruction critic's
        ROC AUC (nan until both outcomes were held out)."""
        held = list(heldout)[-limit:]
        if not held:
            return {}
        labels = [1.0 if t.success else 0.0 for t in held for _ in t.steps]
        v = self.step_critic.values([s.observation for t in held for s in t.steps])
        y = torch.tensor(labels)
        v_instr = self.instr_critic.values([t.steps[0].observation for t in held])
        return {
            "train/critic_brier": float(((v - y) ** 2).mean()),
            "train/critic_accuracy": float(((v > 0.5).float() == y).float().mean()),
            "train/instr_critic_auc": roc_auc(v_instr, [t.success for t in held]),
            "train/critic_heldout": float(len(held)),
        }

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
        cfg = self.config
        pool = list(data)
        if 0 < cfg.advantage_sample < len(pool):
            pool = self.rng.sample(pool, cfg.advantage_sample)
        final = torch.tensor([1.0 if t.success else 0.0 for t in pool])
        if not cfg.critics:  # Filtered BC: top-p by return, every step
            kept_traj, loops = self.without_loops(top_p_by_return(pool, cfg.top_p))
            samples = every_step(kept_traj)
            return samples, {**self._select_stats(pool, kept_traj, samples, None, None), **loops}
        v_instr = self.instr_critic.values([t.steps[0].observation for t in pool])
        a_instr = instruction_advantages(final, v_instr)
        mask = torch.ones(len(pool), dtype=torch.bool)
        whole = torch.zeros(len(pool), dtype=torch.bool)  # rehearsed, past the step filter
        only_rehearsed = torch.zeros(len(pool), dtype=torch.bool)  # not the curriculum's pick
        if cfg.curriculum:
            mask = curriculum_mask(a_instr, cfg.top_p)
            if cfg.rehearse or cfg.rehearse_share:
                scores = a_instr
                if cfg.rehearse_pick == "random":
                    scores = torch.tensor([self.rng.random() for _ in pool])
                rehearsed = rehearsal_mask(
                    [t.task for t in pool], final, scores, cfg.rehearse, cfg.rehearse_share
                )
                only_rehearsed = rehearsed & ~mask
                mask |= rehearsed
                if cfg.rehearse_whole:
                    whole = rehearsed
        weight = [cfg.rehearse_weight if r else 1.0 for r in only_rehearsed.tolist()]
        picked = [(t, w, x) for t, w, x, k in zip(pool, whole.tolist(), weight, mask.tolist()) if k]
        kept_traj, loops = self.without_loops([t for t, _, _ in picked])
        kept = [(t, w, x) for t, (_, w, x) in zip(kept_traj, picked)]
        samples: list[Sample] = []
        all_adv, spreads = [], []
        if kept_traj:
            values = self.step_critic.values([s.observation for t in kept_traj for s in t.steps])
            offset = 0
            for t, w, x in kept:
                v = values[offset : offset + t.length]
                offset += t.length
                spreads.append(float(v.max() - v.min()))
                adv = self.step_advantages(t, v)
                all_adv.append(adv)
                keep = self.step_mask(t, adv, whole=w)
                samples.extend(Sample(t, i, x) for i in range(t.length) if keep[i])
        adv_cat = torch.cat(all_adv) if all_adv else torch.zeros(0)
        stats = {**self._select_stats(pool, kept_traj, samples, v_instr, adv_cat), **loops}
        if spreads:
            stats["train/step_value_spread"] = sum(spreads) / len(spreads)
        return samples, stats

    def step_mask(
        self, t: Trajectory, advantages: torch.Tensor, whole: bool = False
    ) -> torch.Tensor:
        """The steps of `t` the step filter keeps, given their A_step: every step with the
        filter off, of a demonstration with ``keep_demonstration_steps``, or when `whole` (a
        rehearsed success with ``rehearse_whole``)."""
        cfg = self.config
        demo = cfg.keep_demonstration_steps and t.extras.get("demonstration")
        if whole or not cfg.step_filter or demo:
            return torch.ones(t.length, dtype=torch.bool)
        return keep_steps(advantages, horizon(t))

    def step_advantages(self, t: Trajectory, values: torch.Tensor) -> torch.Tensor:
        """A_step of every step of `t` given its step values V(s_1..s_H) (next value after
        the last step: 0)."""
        nxt = torch.cat([values[1:], torch.zeros(1)])
        rewards = torch.tensor([s.reward for s in t.steps], dtype=torch.float32)
        final = 1.0 if t.success else 0.0
        return step_advantages(values, nxt, rewards, final, self.config.lam)

    @staticmethod
    def _select_stats(
        pool: Sequence[Trajectory],
        kept_traj: Sequence[Trajectory],
        samples: Sequence[Sample],
        v_instr: torch.Tensor | None,
        adv: torch.Tensor | None,
    ) -> dict[str, float]:
        kept_steps_in = sum(t.length for t in kept_traj)
        success_steps = sum(t.length for t in kept_traj if t.success)
        out = {
            "train/kept_trajectories": float(len(kept_traj)),
            "train/kept_steps": float(len(samples)),
            "train/curriculum_kept_frac": len(kept_traj) / len(pool) if pool else math.nan,
            "train/step_filter_kept_frac": (
                len(samples) / kept_steps_in if kept_steps_in else math.nan
            ),
            # imitated actions of failed episodes: where a critic's error becomes the policy's
            "train/kept_steps_failed_frac": (
                sum(not s.trajectory.success for s in samples) / len(samples)
                if samples
                else math.nan
            ),
            # steps of kept successes left out: with a flat step critic, a success's first steps
            "train/success_steps_dropped_frac": (
                1.0 - sum(s.trajectory.success for s in samples) / success_steps
                if success_steps
                else math.nan
            ),
        }
        if v_instr is not None:
            final = torch.tensor([1.0 if t.success else 0.0 for t in pool])
            out["train/v_instr_mean"] = float(v_instr.mean())
            out["train/a_instr_mean"] = float((final - v_instr).mean())
        if adv is not None:
            out["train/a_step_mean"] = float(adv.mean()) if adv.numel() else 0.0
        return out


def roc_auc(scores: torch.Tensor, labels: Sequence[bool]) -> float:
    """ROC AUC of `scores` for `labels` (ties count half); nan without both classes."""
    pos = [float(s) for s, y in zip(scores.tolist(), labels) if y]
    neg = [float(s) for s, y in zip(scores.tolist(), labels) if not y]
    if not pos or not neg:
        return math.nan
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))
