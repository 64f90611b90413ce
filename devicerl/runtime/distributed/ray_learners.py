"""``learner.num_workers: N``: the learner as a group of N Ray actors forming one
torch.distributed process group (gloo on CPU, NCCL with ``learner.gpus_per_worker: 1``).

The trainer keeps collection, replay and checkpoints. Each update it puts the replay's new
trajectories in the object store once (`ray.put`), every actor learns its shard of each
minibatch, and the trainer pulls the actor's new weights from rank 0 to publish them. The full
state travels when the group starts (or restarts) and before a checkpoint. An actor that dies
(its node lost, killed) makes the group start again from the trainer's last state: the actor's
newest weights and the critics and optimizers of the last checkpoint.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import torch

from devicerl.agents.base import Policy
from devicerl.algos.base import Learner
from devicerl.errors import ConfigError
from devicerl.records import Trajectory
from devicerl.runtime.distributed.learners import LearnerHandle
from devicerl.runtime.distributed.replica import DeltaEncoder, LearnerState, ReplayDelta

log = logging.getLogger(__name__)
#: Seconds to wait for the learner group to form before giving up.
SETUP_TIMEOUT_S = 300.0


class LearnerWorker:
    """One rank of the group (the body of a Ray actor)."""

    def __init__(self, cfg: Any, rank: int, world_size: int) -> None:
        self.cfg, self.rank, self.world_size = cfg, rank, world_size
        self.replica: Any = None

    def address(self) -> tuple[str, int]:
        """Where the group meets (asked of rank 0)."""
        import ray

        from devicerl.runtime.distributed.process_group import free_port

        return ray.util.get_node_ip_address(), free_port()

    def setup(self, address: str, port: int) -> str:
        from devicerl.runtime.distributed.grad_sync import DataParallelSync
        from devicerl.runtime.distributed.process_group import init_group
        from devicerl.runtime.distributed.replica import LearnerReplica

        lc = self.cfg.learner
        gpu = lc.gpus_per_worker > 0 and torch.cuda.is_available()
        device = torch.device("cuda", 0) if gpu else torch.device("cpu")  # Ray's GPU for us
        info = init_group(
            self.rank, self.world_size, address, port, "auto", device, SETUP_TIMEOUT_S
        )
        self.replica = LearnerReplica(self.cfg, DataParallelSync(), device)
        return info.backend

    def load_state(self, state: LearnerState) -> None:
        self.replica.load_state(state)

    def update(self, delta: ReplayDelta) -> tuple[dict[str, float], float]:
        metrics = self.replica.update(delta)
        return metrics, self.replica.fingerprint()

    def weights(self) -> dict[str, torch.Tensor]:
        return self.replica.actor.get_weights()

    def state(self) -> LearnerState:
        return self.replica.state()

    def pid(self) -> int:
        return os.getpid()


class RayLearners(LearnerHandle):
    """The trainer's handle on N `LearnerWorker` actors (see the module doc)."""

    def __init__(self, cfg: Any, learner: Learner, actor: Policy) -> None:
        super().__init__(learner, actor)
        try:
            import ray
        except ImportError:
            raise ConfigError(
                "learner.num_workers needs Ray: pip install 'devicerl[ray]'"
            ) from None
        self.ray = ray
        self.cfg = cfg
        self.owns_ray = not ray.is_initialized()
        if self.owns_ray:
            cluster = getattr(cfg, "cluster", None)
            address = getattr(cluster, "address", None) or os.environ.get("RAY_ADDRESS")
            address = address or "local"  # our own cluster, never a stray one on this machine
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        self.encoder = DeltaEncoder()
        self.workers: list[Any] = []
        self.restarts = 0
        self._start()

    @property
    def num_processes(self) -> int:
        return len(self.workers)

    def _start(self) -> None:
        lc = self.cfg.learner
        cls = self.ray.remote(LearnerWorker).options(
            num_cpus=1.0, num_gpus=lc.gpus_per_worker, max_restarts=0
        )
        n = lc.num_workers
        self.workers = [cls.remote(self.cfg, r, n) for r in range(n)]
        address, port = self.ray.get(self.workers[0].address.remote(), timeout=SETUP_TIMEOUT_S)
        backends = self.ray.get(
            [w.setup.remote(address, port) for w in self.workers], timeout=SETUP_TIMEOUT_S
        )
        log.info("learner group: %d Ray actors (%s)", n, backends[0])
        self.encoder.reset()
        self.state_sent = False

    def _stop(self) -> None:
        for w in self.workers:
            self.ray.kill(w, no_restart=True)
        self.workers = []

    def update(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        from ray.exceptions import RayError

        try:
            return self._update(trajectories)
        except RayError as e:  # a rank died (or a peer's collective failed because it did)
            first = (str(e).strip().splitlines() or [""])[0][:200]
            log.warning("learner group lost a worker (%s): restarting it", first)
            self.restarts += 1
            self._stop()
            self._start()
            return self._update(trajectories)

    def _update(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        from devicerl.runtime.distributed.process_group import combine

        ray = self.ray
        if not self.state_sent:
            ref = ray.put(LearnerState.of(self.actor, self.learner))
            self._get_all([w.load_state.remote(ref) for w in self.workers])
            self.state_sent = True
        delta = ray.put(self.encoder.encode(trajectories, int(self.actor.version)))
        results = self._get_all([w.update.remote(delta) for w in self.workers])
        self.actor.set_weights(ray.get(self.workers[0].weights.remote()), self.actor.version)
        metrics = combine(results)
        metrics["train/learner_restarts"] = float(self.restarts)
        return metrics

    def _get_all(self, refs: list[Any]) -> list[Any]:
        """Every result, raising at the first failure (a dead rank must not leave us waiting
        on the others, which wait for it)."""
        pending, done = list(refs), {}
        while pending:
            ready, pending = self.ray.wait(pending, num_returns=1)
            for ref in ready:
                done[ref] = self.ray.get(ref)
        return [done[r] for r in refs]

    def refresh(self) -> None:
        if not self.workers or not self.state_sent:
            return
        version = self.actor.version  # the trainer's, one ahead of the group's
        state: LearnerState = self.ray.get(self.workers[0].state.remote())
        state.apply(self.actor, self.learner)
        self.actor.version = version

    def close(self) -> None:
        if self.workers:
            self._stop()
        if self.owns_ray and self.ray.is_initialized():
            self.ray.shutdown()
