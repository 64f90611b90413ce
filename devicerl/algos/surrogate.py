"""The group-relative learners' actor loss: the decoupled clipped surrogate
(`devicerl.algos.group_formulas.clipped_surrogate`), optionally with a KL penalty to the start
policy and an entropy bonus.

At the start of a step the proximal log-probs (the policy as the update begins) of every sample
are computed once, without gradient; the behaviour log-prob is the one recorded when the step
was acted (`Step.log_prob`; the proximal one when none was recorded, e.g. imported data). Each
of ``updates`` optimizer steps draws ``grad_accum`` minibatches of ``batch_size`` samples.
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Sequence

import torch

from devicerl.agents.base import Policy
from devicerl.algos.config import ActorConfig, GRPOConfig
from devicerl.algos.grad_sync import GradSync
from devicerl.algos.group_formulas import clipped_surrogate, kl_k3
from devicerl.algos.regression import observations_of
from devicerl.algos.selection import Sample
from devicerl.errors import ConfigError

#: Cap of the importance weight pi_prox / mu (AReaL's decoupled objective).
WEIGHT_CAP = 5.0
#: Samples scored per call when the proximal log-probs are computed.
SCORE_BATCH = 64


class ClippedSurrogate:
    """Clipped-surrogate updates of ``actor`` (see the module doc)."""

    def __init__(
        self,
        actor: Policy,
        config: ActorConfig,
        grpo: GRPOConfig,
        rng: random.Random,
        grad_sync: GradSync,
    ) -> None:
        if config.entropy is not None and not callable(getattr(actor, "entropy", None)):
            raise ConfigError(
                f"actor.entropy needs an agent with entropy() ({type(actor).__name__} has none)"
            )
        self.actor = actor
        self.config = config
        self.grpo = grpo
        self.rng = rng
        self.grad_sync = grad_sync
        self.optimizer = torch.optim.AdamW(list(actor.parameters()), lr=config.lr, weight_decay=0.0)
        #: a frozen copy of the start policy, for the KL penalty
        self.reference = copy.deepcopy(actor) if grpo.kl_coef is not None else None

    def log_probs(self, policy: Policy, batch: Sequence[Sample]) -> torch.Tensor:
        steps = [s.trajectory.steps[s.index] for s in batch]
        return policy.log_prob(
            observations_of(policy, batch), [st.action for st in steps], [st.text for st in steps]
        )

    def _scored(self, policy: Policy, samples: Sequence[Sample]) -> dict[int, float]:
        out: dict[int, float] = {}
        with torch.no_grad():
            for i in range(0, len(samples), SCORE_BATCH):
                batch = samples[i : i + SCORE_BATCH]
                for s, v in zip(batch, self.log_probs(policy, batch).tolist()):
                    out[id(s)] = float(v)
        return out

    def step(self, samples: Sequence[Sample]) -> dict[str, float]:
        cfg = self.config
        if not samples:
            return {"train/actor_loss": math.nan, "train/actor_samples": 0.0}
        prox = self._scored(self.actor, samples)
        ref = self._scored(self.reference, samples) if self.reference is not None else {}
        behaviour = {
            id(s): st.log_prob if st.log_prob is not None else prox[id(s)]
            for s in samples
            for st in [s.trajectory.steps[s.index]]
        }
        beta = cfg.entropy.weight(self.actor.version) if cfg.entropy is not None else 0.0
        losses, ratios, clipped, kls, norms = [], [], [], [], []
        self.actor.train()  # type: ignore[attr-defined]
        try:
            for _ in range(cfg.updates):
                self.optimizer.zero_grad(set_to_none=True)
                for _ in range(cfg.grad_accum):
                    batch = self.grad_sync.shard(
                        [self.rng.choice(samples) for _ in range(cfg.batch_size)]
                    )
                    loss = self._loss(batch, prox, behaviour, ref, beta, ratios, clipped, kls)
                    losses.append(loss.item())
                    (loss / cfg.grad_accum).backward()
                params = list(self.actor.parameters())
                if (norm := self.grad_sync.step(params, self.optimizer, cfg.grad_clip)) is not None:
                    norms.append(norm)
        finally:
            self.actor.eval()  # type: ignore[attr-defined]
        out = {
            "train/actor_loss": sum(losses) / len(losses) if losses else math.nan,
            "train/actor_samples": float(len(samples)),
            "train/actor_updates": float(cfg.updates),
            "train/ratio_mean": sum(ratios) / len(ratios) if ratios else math.nan,
            "train/clip_frac": sum(clipped) / len(clipped) if clipped else math.nan,
            "train/advantage_abs_mean": sum(abs(s.advantage) for s in samples) / len(samples),
        }
        if kls:
            out["train/kl_to_start"] = sum(kls) / len(kls)
        if norms:
            out["train/actor_grad_norm"] = sum(norms) / len(norms)
        return out

    def _loss(
        self,
        batch: Sequence[Sample],
        prox: dict[int, float],
        behaviour: dict[int, float],
        ref: dict[int, float],
        beta: float,
        ratios: list[float],
        clipped: list[float],
        kls: list[float],
    ) -> torch.Tensor:
        logp = self.log_probs(self.actor, batch)
        dev = logp.device
        as_tensor = lambda d: torch.tensor([d[id(s)] for s in batch], device=dev)  # noqa: E731
        adv = torch.tensor([s.advantage for s in batch], device=dev)
        loss, ratio, held = clipped_surrogate(
            logp, as_tensor(prox), as_tensor(behaviour), adv, self.grpo.clip, WEIGHT_CAP
        )
        ratios.extend(ratio.tolist())
        clipped.extend(held.float().tolist())
        total = loss.mean()
        if ref:
            kl = kl_k3(logp, as_tensor(ref)).mean()
            kls.append(kl.item())
            total = total + float(self.grpo.kl_coef or 0.0) * kl
        if beta > 0:
            entropy = self.actor.entropy(observations_of(self.actor, batch)).mean()
            total = total - beta * entropy
        return total
