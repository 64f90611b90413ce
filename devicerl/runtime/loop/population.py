"""The policies a run acts with and trains: one (`DEFAULT_POLICY`) for a single-policy run, a
league's members otherwise (`devicerl.runtime.loop.league`).

Each `Member` has its live policy and, when it trains, its learner (where its updates run:
this process, a launch's ranks, a Ray learner group or a learner shard) and its replay buffer.
A finished episode goes to the replays the trainer routes it to (its own policy's, and in a
league those of the policy's students); each iteration every trainable member learns from its
replay and its policy version moves on by one. A single-policy run's metrics keep their plain
names; a league's are prefixed ``policy/NAME/``.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from torch import nn

from devicerl.agents.base import Policy
from devicerl.algos.base import Learner
from devicerl.data.replay import ReplayBuffer
from devicerl.records import DEFAULT_POLICY, Trajectory
from devicerl.runtime.acting.copies import Published
from devicerl.runtime.distributed.factory import make_learner_handle
from devicerl.runtime.distributed.learners import LearnerHandle
from devicerl.runtime.distributed.process_group import ProcessGroupInfo
from devicerl.runtime.setup.config import TrainConfig
from devicerl.runtime.setup.learners import make_learner


@dataclass
class Member:
    """One policy of the run: live policy, and for a trainable one its learner and replay."""

    name: str
    policy: Policy
    cfg: TrainConfig  #: the run's config as this member's learner sees it
    make: Callable[[], Policy]  #: a fresh acting copy for the collector
    learner: Learner | None = None
    #: where its updates run (this process, a launch's ranks, Ray learners or a learner shard)
    handle: LearnerHandle | None = None
    replay: ReplayBuffer | None = None
    #: acted with as it is: the collector gets the live object (it never changes)
    frozen: bool = False
    #: settings the trainer may change on the acting copy (PBT's exploration floor)
    configure: Callable[[Policy], None] | None = None

    def published(self) -> Published:
        """How the trainer publishes this member: a trainable one's weights (copied now, in the
        trainer thread); a frozen one as itself."""
        if self.frozen or self.learner is None:
            live = self.policy
            make = (lambda: live) if self.frozen else self.make
            return Published(None, self.policy.version, make, self.configure)
        return Published(self.policy.get_weights(), self.policy.version, self.make, self.configure)


class Population:
    """The run's members (see the module doc)."""

    def __init__(self, cfg: TrainConfig, launch: ProcessGroupInfo | None = None) -> None:
        """``launch``: this process's place in an ``accelerate launch`` (single policy only)."""
        self.cfg = cfg
        self.launch = launch
        self.members: dict[str, Member] = {}
        self.shards: Any = None
        self._threads: ThreadPoolExecutor | None = None
        if cfg.policies and cfg.learner.num_workers > 1:  # a league's learners in shards
            from devicerl.runtime.distributed.shards import LearnerShards

            self.shards = LearnerShards(cfg)
            self._threads = ThreadPoolExecutor(
                max_workers=cfg.learner.num_workers, thread_name_prefix="shard"
            )

    @property
    def single(self) -> bool:
        return list(self.members) == [DEFAULT_POLICY]

    def __contains__(self, name: str) -> bool:
        return name in self.members

    def __getitem__(self, name: str) -> Member:
        return self.members[name]

    def trainable(self) -> list[Member]:
        return [m for m in self.members.values() if m.learner is not None]

    # -- membership ---------------------------------------------------------------------------
    def add_member(
        self,
        name: str,
        policy: Policy,
        cfg: TrainConfig,
        make: Callable[[], Policy],
        *,
        trains: bool = True,
        frozen: bool = False,
        configure: Callable[[Policy], None] | None = None,
    ) -> Member:
        """Add (or rebuild, keeping its replay) member ``name``; with ``trains`` and an algorithm
        that learns, it gets a learner where the config puts it."""
        old = self.members.get(name)
        member = Member(name, policy, cfg, make, frozen=frozen, configure=configure)
        learner = make_learner(cfg, policy) if trains and cfg.mode != "eval" else None
        if learner is not None:
            member.learner = learner
            if self.shards is not None:
                member.handle = self.shards.attach(name, cfg, learner, policy)
            else:
                launch = self.launch if name == DEFAULT_POLICY else None
                member.handle = make_learner_handle(cfg, learner, policy, launch)
            member.replay = (old.replay if old is not None else None) or ReplayBuffer(
                self.cfg.replay_capacity
            )
        if old is not None and old.handle is not None:
            old.handle.close()
        self.members[name] = member
        return member

    def remove_member(self, name: str) -> None:
        member = self.members.pop(name, None)
        if member is not None and member.handle is not None:
            member.handle.close()

    # -- data ---------------------------------------------------------------------------------
    def route(self, t: Trajectory, destinations: list[str]) -> list[str]:
        """Put a labelled, complete trajectory into the replays of ``destinations`` (members
        without one are skipped); returns the members it went to."""
        added = []
        for dest in destinations:
            member = self.members.get(dest)
            if member is None or member.replay is None:
                continue
            member.replay.add_trajectory(t)
            added.append(dest)
        return added

    def add_offline(self, data: list[Trajectory]) -> None:
        """Given data into every trainable member's replay."""
        for member in self.trainable():
            assert member.replay is not None
            for t in data:
                member.replay.add_trajectory(t)

    def replay_size(self) -> int:
        return sum(len(m.replay) for m in self.trainable() if m.replay is not None)

    # -- updates ------------------------------------------------------------------------------
    def update(self) -> dict[str, float]:
        """One update of every trainable member with data, then `next_version`. Learner shards
        update side by side."""

        def one(member: Member) -> dict[str, float]:
            assert member.replay is not None and member.handle is not None
            return member.handle.update(list(member.replay)) if len(member.replay) else {}

        members = self.trainable()
        if self._threads is not None:
            results = list(self._threads.map(one, members))
        else:
            results = [one(m) for m in members]
        self.next_version()
        if self.single:
            return results[0] if results else {}
        out: dict[str, float] = {}
        for member, metrics in zip(members, results):
            metrics["train/replay_size"] = len(member.replay or ())
            metrics["train/policy_version"] = member.policy.version
            out.update({f"policy/{member.name}/{k}": v for k, v in metrics.items()})
        return out

    def next_version(self) -> None:
        """Every member that is not frozen has a new policy version."""
        for member in self.members.values():
            if not member.frozen:
                member.policy.version += 1

    def roster(self, names: set[str] | None = None) -> dict[str, Published]:
        """The members the collector acts with (``names``: only these)."""
        return {n: m.published() for n, m in self.members.items() if names is None or n in names}

    # -- checkpoints ----------------------------------------------------------------------------
    def refresh(self) -> None:
        """Every learner's state into the trainer's copy (where updates run elsewhere)."""
        for member in self.trainable():
            assert member.handle is not None
            member.handle.refresh()

    def checkpoint_parts(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """(models, optimizers, state) of every trainable member, keyed by its name."""
        models: dict[str, Any] = {}
        optims: dict[str, Any] = {}
        state: dict[str, Any] = {}
        for m in self.trainable():
            assert m.learner is not None and m.replay is not None
            models[f"{m.name}.actor"] = m.policy.get_weights()
            models.update({f"{m.name}.{k}": v.state_dict() for k, v in m.learner.modules().items()})
            optims.update(
                {f"{m.name}.{k}": o.state_dict() for k, o in m.learner.optimizers().items()}
            )
            state[m.name] = {
                "version": m.policy.version,
                "replay": m.replay.state_dict(),
                "learner": m.learner.state_dict(),
            }
        return models, optims, state

    def restore(self, ck: Any, store: Any) -> None:
        """Load what `checkpoint_parts` saved into the members present now."""
        for name, saved in ck.state["members"].items():
            member = self.members.get(name)
            if member is None or member.learner is None or member.replay is None:
                continue
            member.policy.set_weights(ck.models[f"{name}.actor"], saved["version"])
            modules: dict[str, nn.Module] = member.learner.modules()
            for k, module in modules.items():
                module.load_state_dict(ck.models[f"{name}.{k}"])
            for k, opt in member.learner.optimizers().items():
                if f"{name}.{k}" in ck.optimizers:
                    opt.load_state_dict(ck.optimizers[f"{name}.{k}"])
            member.learner.load_state_dict(saved["learner"])
            member.replay.load_state_dict(saved["replay"], store, strict=False)

    def close(self) -> None:
        for member in self.members.values():
            if member.handle is not None:
                member.handle.close()
        if self._threads is not None:
            self._threads.shutdown(wait=True)
        if self.shards is not None:
            self.shards.close()
