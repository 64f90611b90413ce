"""The actor's regression: maximise log pi(a | s, c) over the selected steps (DigiRL's
advantage-filtered regression, Filtered BC's behaviour cloning), optionally plus an entropy bonus.

Minibatches are drawn uniformly from the selected samples; each optimizer step accumulates
``grad_accum`` of them. With an entropy bonus (`EntropyConfig`), each minibatch also draws as
many states from every step of the data (failed episodes included: where nothing is imitated,
the bonus keeps the policy from collapsing onto what it learnt on other tasks).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import torch

from devicerl.agents.base import Policy
from devicerl.algos.config import ActorConfig
from devicerl.algos.grad_sync import GradSync
from devicerl.algos.selection import Sample
from devicerl.errors import ConfigError
from devicerl.records import Observation, Trajectory


def observations_of(actor: Policy, batch: Sequence[Sample]) -> list[Observation]:
    """The samples' observations as the actor reads them (with the episode's earlier actions
    when it uses them)."""
    if actor.uses_history:
        return [s.trajectory.agent_observation(s.index) for s in batch]
    return [s.trajectory.steps[s.index].observation for s in batch]


class Regression:
    """Weighted-NLL updates of ``actor`` (see the module doc)."""

    def __init__(
        self, actor: Policy, config: ActorConfig, rng: random.Random, grad_sync: GradSync
    ) -> None:
        if config.entropy is not None and not callable(getattr(actor, "entropy", None)):
            raise ConfigError(
                f"actor.entropy needs an agent with entropy() ({type(actor).__name__} has none)"
            )
        self.actor = actor
        self.config = config
        self.rng = rng
        self.grad_sync = grad_sync
        self.optimizer = torch.optim.AdamW(list(actor.parameters()), lr=config.lr, weight_decay=0.0)

    def step(self, samples: Sequence[Sample], data: Sequence[Trajectory]) -> dict[str, float]:
        """``updates`` optimizer steps over minibatches of ``samples`` (entropy states from
        ``data``); returns the metrics of the step."""
        cfg = self.config
        if not samples:
            return {
                "train/actor_loss": math.nan,
                "train/actor_samples": 0.0,
                "train/actor_lr": cfg.lr,
            }
        beta = cfg.entropy.weight(self.actor.version) if cfg.entropy is not None else 0.0
        states = [Sample(t, i) for t in data for i in range(t.length)] if beta > 0 else []
        losses, norms, entropies = [], [], []
        self.actor.train()  # type: ignore[attr-defined]
        try:
            for _ in range(cfg.updates):
                self.optimizer.zero_grad(set_to_none=True)
                for _ in range(cfg.grad_accum):
                    batch = [self.rng.choice(samples) for _ in range(cfg.batch_size)]
                    loss = self.nll(self.grad_sync.shard(batch)) / cfg.grad_accum
                    losses.append(loss.item() * cfg.grad_accum)
                    if states:
                        seen = [self.rng.choice(states) for _ in range(cfg.batch_size)]
                        seen = self.grad_sync.shard(seen)
                        entropy = self.actor.entropy(observations_of(self.actor, seen)).mean()
                        entropies.append(entropy.item())
                        loss = loss - beta * entropy / cfg.grad_accum
                    loss.backward()
                params = list(self.actor.parameters())
                if (norm := self.grad_sync.step(params, self.optimizer, cfg.grad_clip)) is not None:
                    norms.append(norm)
        finally:
            self.actor.eval()  # type: ignore[attr-defined]
        out = {
            "train/actor_loss": sum(losses) / len(losses) if losses else math.nan,
            "train/actor_samples": float(len(samples)),
            "train/actor_updates": float(cfg.updates),
            "train/actor_lr": cfg.lr,
        }
        if norms:
            out["train/actor_grad_norm"] = sum(norms) / len(norms)
        if entropies:
            out["train/actor_entropy"] = sum(entropies) / len(entropies)
        return out

    def nll(self, batch: Sequence[Sample]) -> torch.Tensor:
        """Mean negative log-likelihood of the samples' recorded actions."""
        steps = [s.trajectory.steps[s.index] for s in batch]
        # only when asked, so a Policy written without the keyword keeps working
        no_floor = {} if self.config.loss_floor else {"floor": False}
        observations = observations_of(self.actor, batch)
        actions, texts = [st.action for st in steps], [st.text for st in steps]
        log_probs = self.actor.log_prob(observations, actions, texts, **no_floor)
        return -log_probs.mean()
