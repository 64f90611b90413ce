"""`RolloutFleet`: the learner's side of rollout groups on a Ray cluster.

The fleet keeps ``rollouts.groups`` group actors alive (Ray places them where their resources
are free; one that cannot be placed waits until a node with room joins), long-polls each for
finished episodes on a background thread, judges each once here (the run's judging stage,
`devicerl.runtime.acting.judging`) and hands them to the trainer through the same interface as
the in-process `BackgroundCollector` (`get`, `publish`, `stats`, `stop`).

- Weights: one ``ray.put`` per published version; every group gets the same object ref, with
  the trainer's exploration windows (the schedule the judged episodes here update).
- Exactly once: episode ids are deduplicated on arrival (a group ships an episode only once it
  ended, and may ship it early from its pool). A finished episode leaves its node unjudged
  within one poll, so a node lost later loses none.
- A lost group (its node removed, its process killed): the episodes it reported running and
  never shipped become truncated ``node_lost`` (``group_lost`` when its node is still up), and a
  new group takes its place where resources allow.
- Backpressure: groups pause while ``max_ahead`` episodes wait here (judged or being judged),
  so data stays fresh and the judge is never handed more than it can answer.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from devicerl.errors import ConfigError
from devicerl.records import DEFAULT_POLICY, Trajectory
from devicerl.runtime.acting.copies import Published
from devicerl.runtime.acting.exploration import ExplorationSchedule
from devicerl.runtime.acting.judging import JudgingStage
from devicerl.runtime.cluster.rollout_group import (
    GROUP_LOST,
    NODE_LOST,
    EpisodeHeader,
    Publication,
    RolloutGroup,
    RolloutGroupSpec,
    Shipment,
)

if TYPE_CHECKING:
    from devicerl.runtime.setup.config import TrainConfig

log = logging.getLogger(__name__)
#: Longest a group holds a pull with nothing to ship (seconds).
POLL_S = 0.5
#: Collector counters (their final metric names) that add up over rollout groups.
_SUMMED = (
    "pool/env_steps",
    "pool/restarts",
    "pool/retired",
    "rollout/episodes",
    "rollout/successes",
    "rollout/truncated",
)


@dataclass
class _GroupRecord:
    """The fleet's record of one rollout group actor."""

    index: int
    incarnation: int
    actor: Any
    pull: Any = None  # the pull in flight
    node_id: str | None = None
    #: episodes it reported running that have not arrived here yet (in any form)
    running: dict[str, EpisodeHeader] = field(default_factory=dict)
    stats: dict[str, float] = field(default_factory=dict)
    paused: bool = False
    retry_at: float = 0.0  # no pull before (after the actor was unreachable)
    acked: int = 0  # number of the last reply taken (the next pull acknowledges it)


def connect(address: str, **init_kwargs: Any) -> bool:
    """Join (or start) Ray; True when this call started it (then the caller shuts it down)."""
    try:
        import ray
    except ImportError:
        raise ConfigError("rollouts.groups needs Ray: pip install 'devicerl[ray]'") from None
    if ray.is_initialized():
        return False
    kwargs = {"include_dashboard": False, "log_to_driver": False, **init_kwargs}
    ray.init(address=address or "local", **kwargs)  # "local": never join a stray cluster
    return True


class RolloutFleet:
    """Rollout groups on a Ray cluster, seen by the trainer as one collection source."""

    def __init__(
        self,
        cfg: TrainConfig,
        *,
        version: int = 0,
        roster: dict[str, Published] | None = None,
        exploration: ExplorationSchedule | None = None,
        max_ahead: int | None = None,
        init_kwargs: dict[str, Any] | None = None,
        ledger: str | os.PathLike[str] | None = None,
    ) -> None:
        """``exploration``: the trainer's schedule (the judged episodes update it, the groups
        plan with its windows); ``ledger``: a file every group appends the id, end reason,
        group and node of each episode to once the fleet acknowledged it (an audit of what
        reached the learner; the path must be writable from every node)."""
        cfg.rollouts.check_placement(cfg.env.worker)
        self.ledger = os.fspath(ledger) if ledger is not None else None
        if cfg.rollouts.groups < 1:
            raise ConfigError("RolloutFleet needs rollouts.groups >= 1")
        self.cfg = cfg
        self.target = cfg.rollouts.groups
        self.max_ahead = max_ahead or 2 * cfg.trajectories_per_iter
        self.owns_ray = connect(cfg.cluster.address, **(init_kwargs or {}))
        import ray

        self.ray = ray
        self.actor_cls = ray.remote(RolloutGroup).options(**cfg.rollouts.actor_options())
        self.counters: Counter[str] = Counter()
        self._members: dict[int, _GroupRecord] = {}
        self._incarnations: Counter[int] = Counter()
        self._gone: dict[str, float] = {}  # summed stats of groups that are gone
        self._lock = threading.Lock()
        self.exploration = exploration
        self._published = Publication(version)
        if roster is not None:
            self.publish(roster, version)
        self._out: deque[Trajectory] = deque()
        self.seen: set[str] = set()  #: ids of every episode that arrived (or was closed lost)
        self.stage = JudgingStage(
            cfg.judge, self._judged, on_episode=self._explored, on_incomplete=self._retry
        )
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="rollout-fleet", daemon=True)

    # -- the collection-source interface ---------------------------------------------------------
    def start(self) -> RolloutFleet:
        self._thread.start()
        return self

    def get(self, timeout: float = 1.0) -> Trajectory | None:
        """The next finished episode, or None after ``timeout`` (raises if collection failed)."""
        end = time.monotonic() + timeout
        while True:
            if self.error is not None:
                raise self.error
            with self._lock:
                if self._out:
                    return self._out.popleft()
            if time.monotonic() >= end:
                return None
            if not self._thread.is_alive():
                raise RuntimeError("rollout fleet stopped")
            time.sleep(0.01)

    def publish(self, roster: dict[str, Published], version: int) -> None:
        """New weights for every group: one object in the store, one ref shared by all (a
        fleet acts with one policy: the roster's `DEFAULT_POLICY`), and the exploration
        windows as they are now."""
        pub = roster.get(DEFAULT_POLICY)
        weights = pub.weights if pub is not None else None
        ref = None
        if weights is not None:
            ref = self.ray.put(weights)
            self.counters["weights_put"] += 1
        windows = self.exploration.state_dict() if self.exploration is not None else None
        with self._lock:  # a group `_fill` creates meanwhile starts from these, or is told
            self._published = Publication(version, ref, windows)
            members = list(self._members.values())
        for m in members:
            m.actor.set_weights.remote(version, [ref] if ref is not None else [], windows)

    @property
    def stats(self) -> dict[str, float]:
        with self._lock:
            live = list(self._members.values())
            out: dict[str, float] = dict(self._gone)
            for m in live:
                for k, v in m.stats.items():
                    if k in _SUMMED:
                        out[k] = out.get(k, 0.0) + v
            out["pool/steps_per_s"] = sum(m.stats.get("pool/steps_per_s", 0.0) for m in live)
            out["cluster/groups_alive"] = float(sum(m.node_id is not None for m in live))
            out["cluster/nodes"] = float(len({m.node_id for m in live if m.node_id}))
            out["cluster/queued"] = float(len(self._out))
            out["judge/pending"] = float(self.stage.pending)
            for k, v in self.counters.items():
                out[f"cluster/{k}"] = float(v)
        return out

    def stop(self, timeout: float = 30.0) -> list[Trajectory]:
        """Stop the groups (episodes still running are dropped), take what they shipped
        last, stop Ray if the fleet started it, then the judging stage (within seconds).
        Returns the finished episodes nobody took: they ended on a device, so the trainer
        stores them (not trained on; those the judge did not answer, unlabelled)."""
        refs = []
        for m in list(self._members.values()):
            if m.node_id is None:  # not placed (or not heard from): nothing to stop
                continue
            with contextlib.suppress(Exception):  # a group that is gone already
                refs.append(m.actor.stop.remote())
        with contextlib.suppress(Exception):
            self.ray.wait(refs, num_returns=len(refs), timeout=timeout)
        self._stop.set()
        self._thread.join(timeout)
        members = list(self._members.values())
        for m in [m for m in members if m.node_id is None]:  # never heard from: nothing to take
            with contextlib.suppress(Exception):
                self.ray.kill(m.actor, no_restart=True)
            members.remove(m)
        for m in members:  # the pull in flight, then one more: nothing shipped is dropped
            for last in (False, True):
                with contextlib.suppress(Exception):
                    ref = m.actor.pull.remote(0.0, m.acked) if last else m.pull
                    if ref is not None and self.ray.wait([ref], timeout=timeout)[0]:
                        self._take(m, self.ray.get(ref))
            m.pull = None
            with contextlib.suppress(Exception):
                self.ray.wait([m.actor.acknowledge.remote(m.acked)], timeout=timeout)
        for m in members:
            with contextlib.suppress(Exception):
                self.ray.kill(m.actor, no_restart=True)
        self._members.clear()
        if self.owns_ray and self.ray.is_initialized():
            self.ray.shutdown()
        left = self.stage.close()
        with self._lock:
            queued, self._out = list(self._out), deque()
        return queued + left

    def _add(self, episodes: list[Trajectory]) -> None:
        """Judge ``episodes`` (each id once), then hand them out. Never waits for the judge:
        the throttle pauses the groups instead."""
        for t in episodes:
            if t.episode_id in self.seen:
                self.counters["duplicates"] += 1
                continue
            self.seen.add(t.episode_id)
            self.stage.put(t, wait=False)

    def _judged(self, t: Trajectory) -> None:
        with self._lock:
            self._out.append(t)

    def _explored(self, t: Trajectory) -> None:
        """A complete, labelled episode: the trainer's exploration schedule counts it."""
        if self.exploration is not None:
            self.exploration.record(t.task, t.success, t.epsilon)

    def _retry(self, t: Trajectory) -> None:
        """A task-group member cut short: back to its group's planner (another group's, if
        that one was lost: every group plans the same tasks), to be run again."""
        if t.plan is None or t.plan.group is None:
            return
        with self._lock:
            m = self._members.get(t.extras.get("rollout_group", -1))
            m = m or next(iter(self._members.values()), None)
        if m is not None:
            m.actor.retry.remote(t.task, t.seed, t.plan)

    # -- introspection (tests, benchmarks) -----------------------------------------------------
    def placement(self) -> dict[int, str | None]:
        """Node id of each group (None: not placed or not heard from yet)."""
        with self._lock:
            return {i: m.node_id for i, m in self._members.items()}

    def members(self) -> dict[int, Any]:
        """The actor handle of each group."""
        with self._lock:
            return {i: m.actor for i, m in self._members.items()}

    # -- the background loop ---------------------------------------------------------------------
    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                self._fill()
                self._poll()
                self._throttle()
        except BaseException as e:  # surfaced to the trainer by `get`
            log.exception("rollout fleet failed")
            self.error = e

    def _fill(self) -> None:
        """Create groups up to the target (Ray queues them until resources allow)."""
        for index in range(self.target):
            if index in self._members:
                continue
            incarnation = self._incarnations[index]
            self._incarnations[index] += 1
            with self._lock:  # with `publish`: never created from weights it is not told of
                spec = RolloutGroupSpec(self.cfg, index, incarnation, self._published, self.ledger)
                member = _GroupRecord(index, incarnation, self.actor_cls.remote(spec))
                self._members[index] = member
            self.counters["groups_created"] += 1

    def _poll(self) -> None:
        poll_s = POLL_S
        now = time.monotonic()
        for m in self._members.values():
            if m.pull is None and now >= m.retry_at:
                m.pull = m.actor.pull.remote(poll_s, m.acked)
        by_ref = {m.pull: m for m in self._members.values() if m.pull is not None}
        if not by_ref:
            time.sleep(poll_s)
            return
        ready, _ = self.ray.wait(list(by_ref), num_returns=1, timeout=poll_s)
        if ready:
            ready, _ = self.ray.wait(list(by_ref), num_returns=len(by_ref), timeout=0)
        for ref in ready:
            m = by_ref[ref]
            m.pull = None
            try:
                shipment: Shipment = self.ray.get(ref)
            except self.ray.exceptions.ActorUnavailableError as e:
                # unreachable for now: its node may be going down, or only slow to answer;
                # pull again shortly, until it answers or Ray declares it dead
                if m.node_id is not None and not self._node_alive(m.node_id):
                    self._lost(m, e)
                else:
                    m.retry_at = time.monotonic() + poll_s
                continue
            except self.ray.exceptions.RayActorError as e:
                if m.node_id is None and "creation task" in str(e):
                    raise RuntimeError(f"rollout group {m.index} could not start: {e}") from e
                self._lost(m, e)
                continue
            self._take(m, shipment)

    def _take(self, m: _GroupRecord, shipment: Shipment) -> None:
        if shipment.error is not None:
            raise RuntimeError(f"rollout group {m.index}: {shipment.error}")
        with self._lock:
            m.node_id, m.stats, m.acked = shipment.node_id, shipment.stats, shipment.seq
            m.running.update((h.episode_id, h) for h in shipment.running)
            for t in shipment.trajectories:
                m.running.pop(t.episode_id, None)
        self._add(shipment.trajectories)

    def _lost(self, m: _GroupRecord, error: BaseException) -> None:
        """A group died: close what it was playing, forget it (`_fill` replaces it)."""
        cause = NODE_LOST if m.node_id is None or not self._node_alive(m.node_id) else GROUP_LOST
        lost = [h.lost(cause) for h in m.running.values() if h.episode_id not in self.seen]
        for t in lost:
            t.extras.update(rollout_group=m.index, node=m.node_id)
        log.warning(
            "rollout group %d on node %s lost (%s): %d episodes truncated %s",
            m.index,
            (m.node_id or "?")[:12],
            type(error).__name__,
            len(lost),
            cause,
        )
        with self._lock:
            for k, v in m.stats.items():
                if k in _SUMMED:
                    self._gone[k] = self._gone.get(k, 0.0) + v
            del self._members[m.index]
        self.counters[f"{cause}_groups"] += 1
        self.counters[f"{cause}_episodes"] += len(lost)
        self._add(lost)  # through the stage: a task-group member is run again elsewhere

    def _node_alive(self, node_id: str) -> bool:
        try:
            nodes = self.ray.nodes()
        except Exception:
            return False
        return any(n["NodeID"] == node_id and n["Alive"] for n in nodes)

    def _throttle(self) -> None:
        """Pause every group while ``max_ahead`` episodes wait here (judged or being judged);
        resume at half."""
        queued = len(self._out) + self.stage.pending
        for m in self._members.values():
            pause = queued >= self.max_ahead or (m.paused and queued > self.max_ahead // 2)
            if pause != m.paused:
                m.paused = pause
                m.actor.throttle.remote(pause)
