"""What every learner shares: the actor's advantage-filtered regression and its bookkeeping.

A learner turns a replay of trajectories into parameter updates. It sees policies, critics and
tensors only — never devices, pools or processes — so the same update runs offline from a stored
dataset or online beside an asynchronous collector.
"""

from __future__ import annotations

import itertools
import math
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch import nn

from devicerl.agents.base import Policy, require_trainable
from devicerl.algos.config import ActorConfig as ActorConfig  # re-export
from devicerl.algos.formulas import filtered_bc_mask
from devicerl.errors import ConfigError
from devicerl.records import Observation, Trajectory

T = TypeVar("T")


class GradSync:
    """How a learner's minibatches are split and its gradients combined. In one process, as
    they are; the runtime swaps in a data-parallel version (`devicerl.runtime.distributed`),
    so the algorithms never see processes: each draws the whole minibatch, learns on
    ``shard(minibatch)`` and calls ``sync(params)`` between backward and clipping."""

    def shard(self, batch: list[T]) -> list[T]:
        """This process's part of a minibatch (every process drew the same one)."""
        return batch

    def sync(self, params: Iterable[nn.Parameter]) -> None:
        """Make ``params``' gradients those of the whole minibatch."""


@dataclass
class Sample:
    """One (observation, action) pair the actor learns to reproduce, with its weight: how
    often a minibatch draws it relative to the other samples (each drawn sample counts alike
    in the loss)."""

    trajectory: Trajectory
    index: int
    weight: float = 1.0


def usable(trajectories: Sequence[Trajectory]) -> list[Trajectory]:
    """Trajectories that can teach: with steps, ended by the task or the agent, never by
    infrastructure (a truncated episode says nothing about the agent)."""
    return [t for t in trajectories if t.steps and t.is_complete and not t.is_truncated]


def every_step(trajectories: Iterable[Trajectory]) -> list[Sample]:
    """One unit-weight sample per step of each trajectory."""
    return [Sample(t, i) for t in trajectories for i in range(t.length)]


def top_p_by_return(data: Sequence[Trajectory], top_p: float) -> list[Trajectory]:
    """The trajectories Filtered BC imitates: the top-p by return, ties kept, never a failure
    (also DigiRL's selection without critics)."""
    returns = torch.tensor([t.total_reward for t in data], dtype=torch.float32)
    return [t for t, k in zip(data, filtered_bc_mask(returns, top_p).tolist()) if k]


def horizon(t: Trajectory, default: int = 10) -> int:
    """The task's step budget H (recorded by the pool), for DigiRL's 1/H threshold."""
    return int(t.extras.get("max_steps") or max(default, t.length))


class Learner(ABC):
    """Updates an actor (and possibly critics) from trajectories."""

    name = "learner"

    def __init__(self, actor: Policy, config: ActorConfig, seed: int = 0) -> None:
        self.actor = require_trainable(actor)
        featurizer = getattr(actor, "featurizer", None)
        if featurizer is not None and hasattr(featurizer, "enable_cache"):
            featurizer.enable_cache()  # replay observations are featurized again and again
        if config.entropy_coef < 0 or config.entropy_versions < 0:
            raise ConfigError(
                "actor.entropy_coef and actor.entropy_versions must be >= 0, got "
                f"{config.entropy_coef} and {config.entropy_versions}"
            )
        if config.lr_versions < 0 or config.lr_final < 0:
            raise ConfigError(
                "actor.lr_versions and actor.lr_final must be >= 0, got "
                f"{config.lr_versions} and {config.lr_final}"
            )
        if config.entropy_coef > 0 and not callable(getattr(actor, "entropy", None)):
            raise ConfigError(
                f"actor.entropy_coef={config.entropy_coef} needs an agent with entropy() "
                f"({type(actor).__name__} has none)"
            )
        self.actor_config = config
        self.actor_opt = torch.optim.AdamW(
            list(actor.parameters()), lr=config.lr, weight_decay=config.weight_decay
        )
        self.rng = random.Random(seed)
        self.updates_done = 0
        self.grad_sync = GradSync()

    @abstractmethod
    def update(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        """One iteration of updates from the replay; returns namespaced metrics."""

    def modules(self) -> dict[str, nn.Module]:
        """Named modules whose weights a checkpoint must hold (the actor is saved apart)."""
        return {}

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"actor": self.actor_opt}

    def without_loops(
        self, trajectories: Sequence[Trajectory]
    ) -> tuple[list[Trajectory], dict[str, float]]:
        """The selected episodes as the actor will imitate them: with ``drop_loops``, each
        without its detours (`Trajectory.without_loops`), and the share of their steps cut."""
        if not self.actor_config.drop_loops:
            return list(trajectories), {}
        out = [t.without_loops() for t in trajectories]
        before = sum(t.length for t in trajectories)
        cut = before - sum(t.length for t in out)
        return out, {"train/loop_steps_dropped_frac": cut / before if before else math.nan}

    # -- the actor's regression ---------------------------------------------------------------
    def actor_step(
        self, samples: Sequence[Sample], data: Sequence[Trajectory] = ()
    ) -> dict[str, float]:
        """``updates`` optimizer steps (fewer with ``max_epochs``) of weighted NLL on minibatches
        drawn from ``samples`` (less no-op steps with ``skip_noops``); with ``entropy_coef``,
        minus that times the policy's entropy on as many states drawn from all steps of
        ``data`` (failed episodes included: where nothing is imitated, the bonus keeps the
        policy from collapsing onto what it learnt on other tasks)."""
        cfg = self.actor_config
        noops = 0
        if cfg.skip_noops:
            kept = [s for s in samples if not s.trajectory.is_noop(s.index)]
            noops, samples = len(samples) - len(kept), kept
        lr = cfg.lr_at(self.actor.version)
        if not samples:
            return {"train/actor_loss": math.nan, "train/actor_samples": 0.0, "train/actor_lr": lr}
        for group in self.actor_opt.param_groups:
            group["lr"] = lr
        draw = self._sampler(samples)
        beta = cfg.entropy_weight(self.actor.version)
        states = every_step(data) if beta > 0 else []
        use_entropy = bool(states)
        losses, norms, entropies = [], [], []
        updates = cfg.updates_for(len(samples))
        self.actor.train()  # type: ignore[attr-defined]
        try:
            for _ in range(updates):
                self.actor_opt.zero_grad(set_to_none=True)
                for _ in range(cfg.grad_accum):
                    batch = [draw() for _ in range(cfg.batch_size)]
                    loss = self._nll(self.grad_sync.shard(batch)) / cfg.grad_accum
                    losses.append(loss.item() * cfg.grad_accum)
                    if use_entropy:
                        seen = [self.rng.choice(states) for _ in range(cfg.batch_size)]
                        seen = self.grad_sync.shard(seen)
                        entropy = self.actor.entropy(self._observations(seen)).mean()
                        entropies.append(entropy.item())
                        loss = loss - beta * entropy / cfg.grad_accum
                    loss.backward()
                params = list(self.actor.parameters())
                self.grad_sync.sync(params)
                if cfg.grad_clip > 0:
                    norms.append(float(nn.utils.clip_grad_norm_(params, cfg.grad_clip)))
                self.actor_opt.step()
        finally:
            self.actor.eval()  # type: ignore[attr-defined]
        self.updates_done += updates
        out = {
            "train/actor_loss": sum(losses) / len(losses) if losses else math.nan,
            "train/actor_samples": float(len(samples)),
            "train/actor_updates": float(updates),
            "train/actor_lr": lr,
        }
        if cfg.skip_noops:
            out["train/actor_noops_skipped"] = float(noops)
        if norms:
            out["train/actor_grad_norm"] = sum(norms) / len(norms)
        if entropies:
            out["train/actor_entropy"] = sum(entropies) / len(entropies)
        return out

    def _sampler(self, samples: Sequence[Sample]) -> Callable[[], Sample]:
        """Draws one imitated step in proportion to its weight (uniformly when the weights are
        equal), with ``balance_tasks`` from a task drawn uniformly first."""
        if not self.actor_config.balance_tasks:
            return self._draw(list(samples))
        by_task: dict[str, list[Sample]] = {}
        for s in samples:
            by_task.setdefault(s.trajectory.task, []).append(s)
        draws = [self._draw(group) for group in by_task.values()]
        return lambda: self.rng.choice(draws)()

    def _draw(self, group: list[Sample]) -> Callable[[], Sample]:
        weights = [s.weight for s in group]
        if min(weights) == max(weights):
            return lambda: self.rng.choice(group)
        cumulative = list(itertools.accumulate(weights))
        return lambda: self.rng.choices(group, cum_weights=cumulative)[0]

    def _observations(self, batch: Sequence[Sample]) -> list[Observation]:
        if self.actor.uses_history:  # the input the actor saw when it acted
            return [s.trajectory.agent_observation(s.index) for s in batch]
        return [s.trajectory.steps[s.index].observation for s in batch]

    def _nll(self, batch: Sequence[Sample]) -> torch.Tensor:
        steps = [s.trajectory.steps[s.index] for s in batch]
        # only when asked, so a Policy written before the keyword keeps working
        floor = {} if self.actor_config.loss_floor else {"floor": False}
        actions, texts = [st.action for st in steps], [st.text for st in steps]
        log_probs = self.actor.log_prob(self._observations(batch), actions, texts, **floor)
        return -log_probs.mean()

    def state_dict(self) -> dict[str, Any]:
        return {"updates_done": self.updates_done, "rng": list(self.rng.getstate()[1])}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.updates_done = int(state.get("updates_done", 0))
        if "rng" in state:
            self.rng.setstate((3, tuple(state["rng"]), None))
