"""``learner.num_workers: N`` in a league: its learners in N Ray actors (AlphaStar's learner
shards), each holding the learners of the policies placed on it.

A policy's learner goes to the least-loaded shard when it joins and leaves it when it is
removed (no fixed capacity, unlike RLlib's "All shards are full!"). It is the data-parallel
learner machinery of `devicerl.runtime.distributed` with one process per learner: the trainer
keeps a full learner per policy (it checkpoints it and publishes its weights), the shard keeps a
`LearnerReplica` fed with `ReplayDelta`s (only new trajectories travel), the full
`LearnerState` travels when a learner is placed or rebuilt and comes back before a checkpoint.
Shards update side by side; policies on one shard update one after another. Each shard asks
one CPU and ``learner.gpus_per_worker`` GPUs of Ray (0.25: a quarter
of a GPU).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from typing import Any

import torch

from devicerl.agents.base import Policy
from devicerl.algos.base import Learner
from devicerl.algos.grad_sync import GradSync
from devicerl.errors import ConfigError
from devicerl.records import Trajectory
from devicerl.runtime.distributed.learners import LearnerHandle
from devicerl.runtime.distributed.replica import DeltaEncoder, LearnerState, ReplayDelta

log = logging.getLogger(__name__)


class ShardWorker:
    """One learner shard (the body of a Ray actor): the replicas of the policies placed here."""

    def __init__(self) -> None:
        from devicerl.runtime.setup.learners import set_torch_threads

        set_torch_threads()
        self.replicas: dict[str, Any] = {}

    def attach(self, name: str, cfg: Any, state: LearnerState) -> None:
        from devicerl.runtime.distributed.replica import LearnerReplica

        replica = LearnerReplica(cfg, GradSync())
        replica.load_state(state)
        self.replicas[name] = replica

    def detach(self, name: str) -> None:
        self.replicas.pop(name, None)

    def update(self, name: str, delta: ReplayDelta) -> dict[str, float]:
        return self.replicas[name].update(delta)

    def weights(self, name: str) -> dict[str, torch.Tensor]:
        return self.replicas[name].actor.get_weights()

    def state(self, name: str) -> LearnerState:
        return self.replicas[name].state()

    def names(self) -> list[str]:
        return sorted(self.replicas)

    def pid(self) -> int:
        return os.getpid()


class LearnerShards:
    """N shard actors (started at the first placement) and which policy lives where."""

    def __init__(self, cfg: Any) -> None:
        try:
            import ray
        except ImportError:
            msg = "learner.num_workers > 1 needs Ray: pip install 'devicerl[ray]'"
            raise ConfigError(msg) from None
        self.ray = ray
        self.cfg = cfg
        self.n = cfg.learner.num_workers
        self.workers: list[Any] = []
        self.placed: dict[str, int] = {}
        self.owns_ray = False
        self._lock = threading.Lock()  # learners are placed from the update threads

    def _start(self) -> None:
        ray = self.ray
        if not ray.is_initialized():
            address = self.cfg.cluster.address or os.environ.get("RAY_ADDRESS") or "local"
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
            self.owns_ray = True
        lc = self.cfg.learner
        cls = ray.remote(ShardWorker).options(
            num_cpus=1.0, num_gpus=lc.gpus_per_worker, max_restarts=0
        )
        self.workers = [cls.remote() for _ in range(self.n)]
        log.info("league: %d learner shards", self.n)

    def place(self, name: str) -> int:
        """The least-loaded shard takes ``name``."""
        with self._lock:
            if not self.workers:
                self._start()
            load = [0] * self.n
            for shard in self.placed.values():
                load[shard] += 1
            self.placed[name] = load.index(min(load))
            return self.placed[name]

    def worker(self, name: str) -> Any:
        return self.workers[self.placed[name]]

    def attach(self, name: str, cfg: Any, learner: Learner, actor: Policy) -> ShardedLearner:
        """The trainer's handle on ``name``'s learner on a shard."""
        return ShardedLearner(self, name, cfg, learner, actor)

    def release(self, name: str) -> None:
        with self._lock:
            shard = self.placed.pop(name, None)
        if shard is not None and self.workers:
            self.ray.get(self.workers[shard].detach.remote(name))

    def close(self) -> None:
        for w in self.workers:
            self.ray.kill(w, no_restart=True)
        self.workers, self.placed = [], {}
        if self.owns_ray and self.ray.is_initialized():
            self.ray.shutdown()


class ShardedLearner(LearnerHandle):
    """One policy's learner on a shard: updates run there, the weights come back."""

    def __init__(
        self, shards: LearnerShards, name: str, cfg: Any, learner: Learner, actor: Policy
    ) -> None:
        super().__init__(learner, actor)
        self.shards, self.name, self.cfg = shards, name, cfg
        self.encoder = DeltaEncoder()
        self.attached = False

    def update(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        ray = self.shards.ray
        if not self.attached:  # placed now: its full state travels once
            self.shards.place(self.name)
            state = LearnerState.of(self.actor, self.learner)
            ray.get(self.shards.worker(self.name).attach.remote(self.name, self.cfg, state))
            self.encoder.reset()
            self.attached = True
        worker = self.shards.worker(self.name)
        delta = self.encoder.encode(trajectories, int(self.actor.version))
        metrics = ray.get(worker.update.remote(self.name, delta))
        self.actor.set_weights(ray.get(worker.weights.remote(self.name)), self.actor.version)
        metrics["train/learner_shard"] = float(self.shards.placed[self.name])
        return metrics

    def refresh(self) -> None:
        if not self.attached:
            return
        version = self.actor.version
        state = self.shards.ray.get(self.shards.worker(self.name).state.remote(self.name))
        state.apply(self.actor, self.learner)
        self.actor.version = version

    def close(self) -> None:
        if self.attached:
            self.shards.release(self.name)
            self.attached = False
