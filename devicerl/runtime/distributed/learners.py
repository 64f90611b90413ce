"""The trainer's handle on its learner: one process (the default), the ranks of an
``accelerate launch``, or a Ray learner group (`ray_learners`).

The trainer always keeps a full learner in its own process (it checkpoints it and publishes its
actor's weights); `refresh` brings it up to date where the updates run elsewhere.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from devicerl.agents.base import Policy
from devicerl.algos.base import Learner
from devicerl.errors import ConfigError
from devicerl.records import Trajectory
from devicerl.runtime.distributed.grad_sync import DataParallelSync
from devicerl.runtime.distributed.process_group import ProcessGroupInfo, broadcast, mean_metrics
from devicerl.runtime.distributed.replica import (
    DeltaEncoder,
    LearnerReplica,
    LearnerState,
    fingerprint,
)

log = logging.getLogger(__name__)


class LearnerHandle:
    """The learner in the trainer's process (single-process path: exactly the learner)."""

    def __init__(self, learner: Learner, actor: Policy) -> None:
        self.learner = learner
        self.actor = actor

    @property
    def num_processes(self) -> int:
        return 1

    def update(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        return self.learner.update(trajectories)

    def refresh(self) -> None:
        """Make the local learner hold the current state of the learners (before a checkpoint)."""

    def close(self) -> None:
        """Stop whatever processes the handle started."""


class LaunchedLearners(LearnerHandle):
    """Rank 0 of an ``accelerate launch``: runs the trainer and learns on its shard; each
    update first broadcasts the new data (and, the first time, the full state) to the other
    ranks, which run `follow`."""

    def __init__(self, cfg: Any, learner: Learner, actor: Policy, launch: ProcessGroupInfo) -> None:
        super().__init__(learner, actor)
        self.launch = launch
        learner.grad_sync = DataParallelSync()
        self.encoder = DeltaEncoder()
        self.state_sent = False
        broadcast({"op": "start", "cfg": cfg})
        log.info("learner: %d processes (%s)", launch.world_size, launch.backend)

    @property
    def num_processes(self) -> int:
        return self.launch.world_size

    def update(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        if not self.state_sent:  # after a resume too: the followers start from our state
            broadcast({"op": "state", "state": LearnerState.of(self.actor, self.learner)})
            self.state_sent = True
        delta = self.encoder.encode(trajectories, int(self.actor.version))
        broadcast({"op": "update", "delta": delta})
        metrics = self.learner.update(trajectories)
        return mean_metrics(metrics, fingerprint(self.actor, self.learner))

    def close(self) -> None:
        release(self.launch)


def release(launch: ProcessGroupInfo) -> None:
    """Rank 0: tell the follower ranks to exit (once)."""
    if launch.rank == 0 and not launch.released:
        broadcast({"op": "stop"})
        launch.released = True


def follow(launch: ProcessGroupInfo) -> int:
    """A rank other than 0: learn whatever rank 0 sends until it says stop."""
    msg = broadcast()
    if msg["op"] == "stop":
        return 0
    replica = LearnerReplica(msg["cfg"], DataParallelSync(), launch.device)
    while True:
        msg = broadcast()
        if msg["op"] == "state":
            replica.load_state(msg["state"])
        elif msg["op"] == "update":
            metrics = replica.update(msg["delta"])
            mean_metrics(metrics, replica.fingerprint())
        elif msg["op"] == "stop":
            return 0
        else:
            raise RuntimeError(f"learner rank {launch.rank}: unknown message {msg['op']!r}")


def check_batch_sizes(cfg: Any, processes: int) -> None:
    """Every minibatch must give each learner process at least one item."""
    sizes = {"actor.batch_size": cfg.actor.batch_size}
    if cfg.algo == "digirl":
        sizes["critic.batch_size"] = cfg.critic.batch_size
    for key, size in sizes.items():
        if size < processes:
            raise ConfigError(f"{key}={size} is smaller than the {processes} learner processes")
