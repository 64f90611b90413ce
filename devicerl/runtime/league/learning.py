"""Per-policy learning in a league run: each trainable policy owns a replay buffer and a
learner (its algorithm and hyperparameters from its `PolicySpec`), in the trainer process by
default or in a learner shard process (`devicerl.runtime.league.shards`).

A finished episode goes to `League.destinations(policy)`: its own replay, and those of its
students (a generalist whose ``learn_from`` names the specialists), where the student's own
filter keeps it or not, as it does its own episodes (Distral-style distillation through data).
Teachers' episodes are exempt from the student's policy-lag limit (their versions count
another policy's updates).
"""

from __future__ import annotations

import copy
import dataclasses
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from devicerl.algos.base import Learner
from devicerl.data.replay import ReplayBuffer
from devicerl.league.acting import POLICY_KEY
from devicerl.league.config import PolicySpec
from devicerl.league.state import League
from devicerl.records import Trajectory
from devicerl.runtime.distributed.learners import LearnerGroup
from devicerl.runtime.learner_setup import make_learner
from devicerl.runtime.train_config import TrainConfig


def policy_config(cfg: TrainConfig, name: str, spec: PolicySpec) -> TrainConfig:
    """The run's config as one policy's learner sees it: its agent, algorithm and
    hyperparameters, and a seed of its own."""
    seed = (cfg.seed * 1_000_003 + zlib.crc32(name.encode())) % 2**31
    spec = copy.deepcopy(spec)  # a later PBT exploit changes the spec, not this learner
    return dataclasses.replace(
        cfg,
        agent=spec.agent,
        algo=spec.algo,
        digirl=spec.digirl,
        filtered_bc=spec.filtered_bc,
        seed=seed,
        policies={},
    )


@dataclass
class PolicyLearner:
    """One trainable policy's learning: its config, learner, where it runs, its replay."""

    name: str
    cfg: TrainConfig
    learner: Learner
    group: LearnerGroup
    replay: ReplayBuffer

    def metrics_prefix(self) -> str:
        return f"policy/{self.name}/"


class LeagueLearners:
    """The learners of a league's trainable policies (added and removed with them)."""

    def __init__(self, cfg: TrainConfig, league: League) -> None:
        self.cfg = cfg
        self.league = league
        self.by_name: dict[str, PolicyLearner] = {}
        self.shards: Any = None
        if cfg.league.learner_shards > 0:
            from devicerl.runtime.league.shards import LearnerShards

            self.shards = LearnerShards(cfg)
        self._pool = (
            ThreadPoolExecutor(max_workers=cfg.league.learner_shards, thread_name_prefix="shard")
            if self.shards is not None
            else None
        )

    # -- membership ---------------------------------------------------------------------------
    def add(self, name: str) -> PolicyLearner:
        """A learner (and replay) for trainable member ``name``, trained from its live policy."""
        member = self.league[name]
        pcfg = policy_config(self.cfg, name, member.spec)
        learner = make_learner(pcfg, member.policy)
        if learner is None:
            raise ValueError(f"policies.{name}: algo {member.spec.algo!r} cannot train")
        if self.shards is not None:
            group: LearnerGroup = self.shards.attach(name, pcfg, learner, member.policy)
        else:
            group = LearnerGroup(learner, member.policy)
        old = self.by_name.get(name)
        replay = old.replay if old is not None else self._replay()
        if old is not None:
            old.group.close()
        pl = PolicyLearner(name, pcfg, learner, group, replay)
        self.by_name[name] = pl
        return pl

    def _replay(self) -> ReplayBuffer:
        return ReplayBuffer(self.cfg.replay_capacity, max_lag=self.cfg.max_policy_lag or None)

    def remove(self, name: str) -> None:
        pl = self.by_name.pop(name, None)
        if pl is not None:
            pl.group.close()

    def sync_members(self) -> None:
        """Learners for trainable members that have none; none for members that left."""
        for name in self.league.trainable():
            if name not in self.by_name:
                self.add(name)
        for name in list(self.by_name):
            if name not in self.league or not self.league[name].spec.trainable:
                self.remove(name)

    def reset_after_exploit(self, target: str, donor: str) -> None:
        """A PBT exploit: ``target`` took ``donor``'s actor weights and new hyperparameters. Its
        learner is rebuilt with them (fresh optimiser state: the 'reset' choice of
        docs/league.md), its critics copied from the donor's."""
        self.by_name[donor].group.refresh()  # a shard's critics, into the trainer's copy
        donor_learner = self.by_name[donor].learner
        pl = self.add(target)
        for key, module in pl.learner.modules().items():
            module.load_state_dict(donor_learner.modules()[key].state_dict())

    # -- data ---------------------------------------------------------------------------------
    def route(self, t: Trajectory, train: bool = True) -> list[str]:
        """Put a labelled, complete trajectory into the replays ``League.destinations`` names;
        returns them. The acting policy's own lag limit applies to its own replay only."""
        policy = t.extras.get(POLICY_KEY)
        if not train or policy is None:
            return []
        out = []
        for dest in self.league.destinations(policy):
            pl = self.by_name.get(dest)
            if pl is None:
                continue
            own = dest == policy
            lag = pl.learner.actor.version - t.policy_version
            if own and self.cfg.max_policy_lag and lag >= self.cfg.max_policy_lag:
                continue
            pl.replay.add(t, offline=not own)
            out.append(dest)
        return out

    # -- updates ------------------------------------------------------------------------------
    def update(self) -> dict[str, float]:
        """One update of every policy with data, namespaced ``policy/NAME/...``; each updated
        policy's version moves on by one. Learner shards update side by side."""
        todo = [pl for pl in self.by_name.values() if len(pl.replay)]

        def one(pl: PolicyLearner) -> dict[str, float]:
            version = pl.learner.actor.version
            evicted = len(pl.replay.evict_stale(version))
            metrics = pl.group.update(list(pl.replay)) if len(pl.replay) else {}
            pl.learner.actor.version = version + 1
            metrics["train/replay_evicted_stale"] = evicted
            metrics["train/replay_size"] = len(pl.replay)
            metrics["train/policy_version"] = pl.learner.actor.version
            return {pl.metrics_prefix() + k: v for k, v in metrics.items()}

        out: dict[str, float] = {}
        if self._pool is not None:
            for metrics in self._pool.map(one, todo):
                out.update(metrics)
        else:
            for pl in todo:
                out.update(one(pl))
        return out

    def refresh(self) -> None:
        for pl in self.by_name.values():
            pl.group.refresh()

    def close(self) -> None:
        for pl in self.by_name.values():
            pl.group.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if self.shards is not None:
            self.shards.close()
