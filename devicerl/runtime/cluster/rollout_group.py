"""A rollout group: one Ray actor owning a node-local device pool and a policy replica.

The group runs the same `Collector` a single-process run uses, on its own thread, with a
planner and a policy built by the trainer's own functions (`devicerl.runtime.setup.acting`),
and keeps what it produced in an outbox until the learner's fleet pulls it (a long poll:
`pull` returns as soon as something is ready). It ships whole finished episodes, unjudged
(the learner's judging stage labels each once, `devicerl.runtime.acting.judging`), never
single steps, and each at most once: an episode that ended while its device resets (Android
resets take 10-60 s) is shipped from the pool at once, and skipped when the collector hands it
out later. Every reply also lists the episodes still running, so the fleet can close them as
truncated ``node_lost`` if this node disappears.

Weights arrive as versioned Ray object refs, with the trainer's exploration windows; the
collector thread fetches only the newest weights, between two batched agent calls. A task-group
member the learner found cut short comes back through `retry`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from devicerl.agents.base import Policy
from devicerl.records import DEFAULT_POLICY, EndReason, EpisodePlan, Trajectory
from devicerl.runtime.acting.exploration import ExplorationSchedule
from devicerl.runtime.acting.sources import CollectorThread
from devicerl.runtime.setup.acting import make_planner, make_policy

if TYPE_CHECKING:
    from devicerl.runtime.setup.config import TrainConfig

log = logging.getLogger(__name__)
NODE_LOST = "node_lost"  #: truncation cause of episodes running on a node that disappeared
GROUP_LOST = "group_lost"  #: ... on a group whose actor died while its node stayed up


@dataclass
class EpisodeHeader:
    """What the learner needs to account for a running episode if its node is lost."""

    episode_id: str
    task: str
    instruction: str
    seed: int
    env_id: int | None
    device: str
    steps: int
    started_at: float
    extras: dict[str, Any]
    max_steps: int | None = None
    plan: EpisodePlan | None = None

    @classmethod
    def of(cls, t: Trajectory) -> EpisodeHeader:
        return cls(
            t.episode_id,
            t.task,
            t.instruction,
            t.seed,
            t.env_id,
            t.device,
            len(t.steps),
            t.started_at,
            dict(t.extras),
            t.max_steps,
            t.plan,
        )

    def lost(self, cause: str) -> Trajectory:
        """The record of this episode, cut short by ``cause`` (its steps died with the node)."""
        traj = Trajectory(
            task=self.task,
            instruction=self.instruction,
            seed=self.seed,
            episode_id=self.episode_id,
            env_id=self.env_id,
            device=self.device,
            started_at=self.started_at,
            extras={**self.extras, "lost_steps": self.steps},
            max_steps=self.max_steps,
            plan=self.plan,
        )
        return traj.end(EndReason.TRUNCATED, success=False, cause=cause)


@dataclass
class Shipment:
    """One reply of `RolloutGroup.pull`."""

    trajectories: list[Trajectory]
    running: list[EpisodeHeader]
    stats: dict[str, float]
    node_id: str
    error: str | None = None
    stopped: bool = False
    #: this reply's number: the next pull acknowledges it (then the ledger records it)
    seq: int = 0


@dataclass
class Publication:
    """What the trainer published last: a policy version, its weights (a Ray ObjectRef of the
    weights dict; None: only the version moves) and its exploration windows."""

    version: int
    ref: Any = None
    exploration: dict[str, Any] | None = None


@dataclass
class RolloutGroupSpec:
    """Everything a group needs, picklable: the run's config and this group's place."""

    cfg: TrainConfig
    index: int
    incarnation: int = 0
    published: Publication = field(default_factory=lambda: Publication(0))
    #: audit file each group appends the episodes the learner received from it to (None: none)
    ledger: str | None = None

    def seed(self) -> int:
        """Distinct task instances per group and per incarnation (and after a resume)."""
        seq = np.random.SeedSequence(
            [self.cfg.seed, self.index, self.incarnation, self.published.version]
        )
        return int(seq.generate_state(1)[0])


class RolloutGroup:
    """The actor body (wrapped with ``ray.remote`` by the fleet)."""

    def __init__(self, spec: RolloutGroupSpec) -> None:
        import ray

        self.ray = ray
        self.spec = spec
        cfg = spec.cfg
        self.node_id: str = ray.get_runtime_context().get_node_id()
        # the node's GPU when Ray gave the group one, else its CPU
        self.policy: Policy = make_policy(cfg.agent, "cuda" if ray.get_gpu_ids() else "cpu")
        self.policy.version = -1  # the published weights load before the first batch
        self._cond = threading.Condition()
        self._latest = spec.published
        self.exploration = ExplorationSchedule.from_config(cfg.exploration)
        self._explore(spec.published)
        self.current(set())
        self._outbox: deque[Trajectory] = deque()
        self._early: set[str] = set()  # shipped from the pool before the collector saw them
        self._seq = 0
        self._unacked: dict[int, str] = {}  # ledger rows of replies not acknowledged yet
        self._ledger_lock = threading.Lock()
        self._paused = False
        self.planner = make_planner(cfg, spec.seed(), exploration=self.exploration)
        self.thread = CollectorThread(
            lambda: cfg.env.make_pool(self.planner, seed=spec.seed()),
            self,
            self._ship,
            overlap=cfg.overlap,
            batch=-(-cfg.trajectories_per_iter // max(1, cfg.rollouts.groups)),
            paused=lambda: self._paused,
            name="rollout-group",
        ).start()

    # -- calls from the fleet -------------------------------------------------------------------
    def where(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "pid": os.getpid(), "device": str(self.policy_device)}

    @property
    def policy_device(self) -> str:
        params = next(iter(self.policy.parameters()), None) if self.policy.trainable else None
        return str(params.device) if params is not None else "cpu"

    def set_weights(
        self, version: int, refs: list[Any], exploration: dict[str, Any] | None = None
    ) -> None:
        """Offer weights ``version`` (``refs``: [ObjectRef] or [] for a version-only update)
        and the trainer's exploration windows; the collector thread loads the newest weights
        between two batches, new episodes are planned with the windows at once."""
        published = Publication(version, refs[0] if refs else None, exploration)
        with self._cond:
            if version > self._latest.version:
                self._latest = published
        self._explore(published)
        self.thread.resume.set()

    def retry(self, task: str, seed: int | None, plan: EpisodePlan | None) -> bool:
        """A task-group member of this group that the learner found cut short (truncated, or
        unlabelled by the judge): its planner runs the instance again (within its re-runs)."""
        return self.planner.rerun(task, seed, plan)

    def throttle(self, paused: bool) -> None:
        """Pause (or resume) collection: the learner has enough unconsumed episodes."""
        self._paused = paused
        self.thread.resume.set()

    def pull(self, timeout_s: float, ack: int = 0) -> Shipment:
        """Finished episodes not shipped yet (waits up to ``timeout_s`` for one); ``ack``: the
        number of the last reply the fleet received."""
        self.acknowledge(ack)
        end = time.monotonic() + timeout_s
        with self._cond:
            while not (
                self._outbox or self.error or self.thread.stop_event.is_set() or self._ended()
            ):
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(0.05, left))
            items = list(self._outbox)
            self._outbox.clear()
        out = [t for t in items if not self._shipped_early(t)]
        running, ended = self._in_pool()
        shipping = {t.episode_id for t in out}
        for t in ended:  # ended while its device resets: ship it now, skip it later
            if t.episode_id not in self._early and t.episode_id not in shipping:
                self._early.add(t.episode_id)
                out.append(t)
        for t in out:
            t.extras.setdefault("rollout_group", self.spec.index)
            t.extras.setdefault("node", self.node_id)
        rows = self._rows(out)
        with self._ledger_lock:
            self._seq += 1
            seq = self._seq
            if rows:
                self._unacked[seq] = rows
        return Shipment(
            out,
            [EpisodeHeader.of(t) for t in running],
            self._stats(),
            self.node_id,
            self.error,
            stopped=not self.thread.alive,
            seq=seq,
        )

    def acknowledge(self, seq: int) -> None:
        """The fleet received every reply up to ``seq``: the ledger records what they carried
        (so it lists only what reached the learner, never a reply lost with this node)."""
        path = self.spec.ledger
        with self._ledger_lock:
            done = sorted(k for k in self._unacked if k <= seq)
            rows = "".join(self._unacked.pop(k) for k in done)
            if path and rows:
                with open(path, "a") as f:  # one append per reply; O_APPEND keeps writers apart
                    f.write(rows)

    def stop(self, timeout_s: float = 30.0) -> dict[str, float]:
        """Stop collecting and close the devices (episodes in flight are dropped)."""
        self.thread.stop(timeout_s)
        return self._stats()

    # -- the collector thread ---------------------------------------------------------------------
    @property
    def error(self) -> str | None:
        e = self.thread.error
        return f"{type(e).__name__}: {e}" if e is not None else None

    @property
    def collector(self) -> Any:
        return self.thread.collector

    @property
    def pool(self) -> Any:
        return self.thread.pool

    def _ship(self, traj: Trajectory) -> bool:
        with self._cond:
            self._outbox.append(traj)
            self._cond.notify_all()
        return True

    # the collector's policy source: the newest published weights, fetched between batches
    @property
    def version(self) -> int:
        return self._latest.version

    def wait_newer(self, version: int, stop: threading.Event) -> None:
        while self._latest.version <= version and not stop.is_set():
            self.thread.resume.wait(0.2)
            self.thread.resume.clear()

    def current(self, in_use: set[str]) -> dict[str, Policy]:
        latest = self._latest
        if latest.version > self.policy.version:
            weights = self.ray.get(latest.ref) if latest.ref is not None else None
            if weights is None:
                self.policy.version = latest.version
            else:
                self.policy.set_weights(weights, latest.version)
        return {DEFAULT_POLICY: self.policy}

    # -- helpers ---------------------------------------------------------------------------------
    def _explore(self, published: Publication) -> None:
        if self.exploration is not None and published.exploration is not None:
            self.exploration.load_state_dict(published.exploration)

    def _in_pool(self) -> tuple[list[Trajectory], list[Trajectory]]:
        pool = self.pool
        return pool.episodes_in_progress() if pool is not None else ([], [])

    def _ended(self) -> bool:
        """Something finished that the fleet has not got yet (`pull` answers at once)."""
        return any(t.episode_id not in self._early for t in self._in_pool()[1])

    def _shipped_early(self, t: Trajectory) -> bool:
        if t.episode_id in self._early:
            self._early.discard(t.episode_id)
            return True
        return False

    def _stats(self) -> dict[str, float]:
        out = dict(self.collector.stats.as_dict()) if self.collector is not None else {}
        out["policy_version"] = float(self.policy.version)
        return out

    def _rows(self, shipped: list[Trajectory]) -> str:
        """Ledger rows: episode id, end reason, group, node."""
        if not self.spec.ledger:
            return ""
        return "".join(
            f"{t.episode_id}\t{t.end_reason.value}\t{self.spec.index}\t{self.node_id}\n"
            for t in shipped
            if t.end_reason is not None
        )
