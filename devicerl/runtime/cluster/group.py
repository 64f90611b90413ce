"""A rollout group: one Ray actor owning a node-local device pool, a policy replica and a judge.

The group runs the same `Collector` a single-process run uses, on its own thread, and keeps
what it produced in an outbox until the learner's fleet pulls it (a long poll: `pull` returns
as soon as something is ready). It ships whole finished episodes, never single steps, and each
at most once: an episode that ended while its device resets (Android resets take 10-60 s) is
shipped from the pool at once, and skipped when the collector hands it out later. With a VLM
judge an episode leaves as soon as it ended too, unjudged (`Shipment.awaiting`), and its labels
follow once judged (`Relabel`; see `devicerl.runtime.cluster.verdicts`), so a node lost while
verdicts are pending loses no finished episode. Every reply also lists the episodes still
running, so the fleet can close them as truncated ``node_lost`` if this node disappears.
Weights arrive as versioned Ray object refs; the collector thread fetches only the newest one,
between two batched agent calls.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from devicerl.agents.base import Policy
from devicerl.records import DEFAULT_POLICY, EndReason, EpisodePlan, Trajectory
from devicerl.runtime.acting.collector_thread import CollectorThread
from devicerl.runtime.acting.exploration import ExplorationSchedule
from devicerl.runtime.acting.planning import EpisodePlanner
from devicerl.runtime.cluster.verdicts import JudgeEscrow, Relabel, detached
from devicerl.tasks import TaskSampler, resolve

if TYPE_CHECKING:
    from devicerl.runtime.setup.config import TrainConfig

log = logging.getLogger(__name__)
NODE_LOST = "node_lost"  #: truncation cause of episodes running on a node that disappeared
GROUP_LOST = "group_lost"  #: ... on a group whose actor died while its node stayed up
AWAITING = "awaiting_verdict"  #: ledger reason of an episode shipped before its verdict


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
    #: finished episodes still waiting for their verdict (unjudged copies, each shipped once)
    awaiting: list[Trajectory] = field(default_factory=list)
    #: verdicts of episodes shipped earlier in ``awaiting``
    labels: list[Relabel] = field(default_factory=list)
    #: this reply's number: the next pull acknowledges it (then the ledger records it)
    seq: int = 0


@dataclass
class _Weights:
    version: int
    ref: Any = None  # a Ray ObjectRef of the weights dict (None: only the version moves)


@dataclass
class GroupSpec:
    """Everything a group needs, picklable: the run's config and this group's place."""

    cfg: TrainConfig
    index: int
    incarnation: int = 0
    weights: _Weights = field(default_factory=lambda: _Weights(0))
    #: audit file each group appends the episodes the learner received from it to (None: none)
    ledger: str | None = None

    def seed(self) -> int:
        """Distinct task instances per group and per incarnation (and after a resume)."""
        seq = np.random.SeedSequence(
            [self.cfg.seed, self.index, self.incarnation, self.weights.version]
        )
        return int(seq.generate_state(1)[0])


class RolloutGroup:
    """The actor body (wrapped with ``ray.remote`` by the fleet)."""

    def __init__(self, spec: GroupSpec) -> None:
        import ray

        self.ray = ray
        self.spec = spec
        cfg = spec.cfg
        self.node_id: str = ray.get_runtime_context().get_node_id()
        device = "cuda" if ray.get_gpu_ids() else "cpu"  # the node's GPU when Ray gave one
        self.policy: Policy = replace(cfg.agent, device=device).make()
        self._latest = spec.weights
        self.policy.version = -1
        self.current(set())
        self._cond = threading.Condition()
        self._outbox: deque[Trajectory] = deque()
        self._early: set[str] = set()  # shipped from the pool before the collector saw them
        self._awaiting: set[str] = set()  # shipped unjudged; their labels still to ship
        self._seq = 0
        self._unacked: dict[int, str] = {}  # ledger rows of replies not acknowledged yet
        self._ledger_lock = threading.Lock()
        self._paused = False
        self.judge: JudgeEscrow | None = None
        if cfg.judge.kind != "native":
            from devicerl.judges.factory import make_runner

            self.judge = JudgeEscrow(make_runner(cfg.judge))
        sampler = TaskSampler(
            resolve(cfg.tasks.train), seed=spec.seed(), max_steps=cfg.tasks.max_steps
        )
        planner = EpisodePlanner(
            sampler,
            exploration=ExplorationSchedule.from_config(cfg.exploration),
            group_size=cfg.group_size,
            name=f"{uuid.uuid4().hex[:8]}.",
        )
        self.thread = CollectorThread(
            lambda: cfg.env.make_pool(planner, seed=spec.seed()),
            self,
            self._ship,
            judge=self.judge,
            on_episode=planner.record,
            on_incomplete=planner.retry,
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

    def set_weights(self, version: int, refs: list[Any]) -> None:
        """Offer weights ``version`` (``refs``: [ObjectRef] or [] for a version-only update);
        the collector thread loads the newest between two batches."""
        with self._cond:
            if version > self._latest.version:
                self._latest = _Weights(version, refs[0] if refs else None)
        self.thread.resume.set()

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
        held = self.judge.held() if self.judge is not None else {}
        running, ended = self._in_pool()
        awaiting: list[Trajectory] = []
        labels: list[Relabel] = []
        if self.judge is None:
            shipping = {t.episode_id for t in out}
            for t in ended:
                if t.episode_id not in self._early and t.episode_id not in shipping:
                    self._early.add(t.episode_id)
                    out.append(t)
        else:  # ship what ended now, its verdict later: nothing finished stays only here
            out, labels, awaiting = self._judged_split(out, held, ended)
        for t in [*out, *awaiting]:
            t.extras.setdefault("rollout_group", self.spec.index)
            t.extras.setdefault("node", self.node_id)
        rows = self._rows(
            [(t.episode_id, t.end_reason) for t in out]
            + [(t.episode_id, AWAITING) for t in awaiting]
            + [(r.episode_id, r.end_reason) for r in labels]
        )
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
            awaiting=awaiting,
            labels=labels,
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

    def _judged_split(
        self, out: list[Trajectory], held: dict[str, Trajectory], ended: list[Trajectory]
    ) -> tuple[list[Trajectory], list[Relabel], list[Trajectory]]:
        """(whole episodes, labels of episodes shipped unjudged before, unjudged episodes)."""
        assert self.judge is not None
        whole: list[Trajectory] = []
        labels: list[Relabel] = []
        for t in out:  # judged (or truncated) episodes the collector handed out
            self.judge.release(t.episode_id)
            held.pop(t.episode_id, None)
            if t.episode_id in self._awaiting:
                self._awaiting.discard(t.episode_id)
                t.extras.setdefault("rollout_group", self.spec.index)
                t.extras.setdefault("node", self.node_id)
                labels.append(Relabel.of(t))
            else:
                whole.append(t)
        done = {t.episode_id for t in out}
        awaiting = []
        for t in [*held.values(), *ended]:
            if t.episode_id not in self._awaiting and t.episode_id not in done:
                self._awaiting.add(t.episode_id)
                awaiting.append(t if t.episode_id in held else detached(t))
        return whole, labels, awaiting

    def stop(self, timeout_s: float = 30.0) -> dict[str, float]:
        """Stop collecting and close the devices (episodes in flight are dropped)."""
        self.thread.stop(timeout_s)
        if self.judge is not None:  # verdicts still coming: the last pull ships them
            judged = self.judge.drain(timeout_s)
            with self._cond:
                self._outbox.extend(j.trajectory for j in judged)
            self.judge.close(wait=False)
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
    def _in_pool(self) -> tuple[list[Trajectory], list[Trajectory]]:
        pool = self.pool
        return pool.episodes_in_progress() if pool is not None else ([], [])

    def _ended(self) -> bool:
        """Something finished that the fleet has not got yet (`pull` answers at once)."""
        ended = [t.episode_id for t in self._in_pool()[1]]
        if self.judge is None:
            return any(i not in self._early for i in ended)
        return any(i not in self._awaiting for i in [*self.judge.held(), *ended])

    def _shipped_early(self, t: Trajectory) -> bool:
        if t.episode_id in self._early:
            self._early.discard(t.episode_id)
            return True
        return False

    def _stats(self) -> dict[str, float]:
        out = dict(self.collector.stats.as_dict()) if self.collector is not None else {}
        out["policy_version"] = float(self.policy.version)
        return out

    def _rows(self, shipped: list[tuple[str, EndReason | str | None]]) -> str:
        """Ledger rows: episode id, end reason (`AWAITING` for an unjudged copy), group, node."""
        if not self.spec.ledger:
            return ""
        return "".join(
            f"{episode_id}\t{getattr(reason, 'value', reason)}\t{self.spec.index}\t{self.node_id}\n"
            for episode_id, reason in shipped
            if reason is not None
        )
