"""Acting beside learning: a collector thread that keeps devices busy while the learner updates.

The learner publishes weights into a `WeightMailbox`; the collector thread picks them up between
batches (so no batch mixes two policies) and stamps every step with the policy version.
Trajectories flow to the learner through a bounded queue. Two throttles bound how stale data
can get without wasting device time on data that would be thrown away:

- ``max_ahead``: the collector pauses once this many finished trajectories wait unconsumed;
- ``overlap=False``: the collector pauses after each batch of ``batch`` trajectories until the
  learner publishes new weights (DigiRL's collect-then-learn rhythm, for comparison).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from devicerl.agents.base import Policy
from devicerl.errors import DeviceRLError
from devicerl.pool.pool import EnvPool
from devicerl.records import Trajectory
from devicerl.runtime.collector import Collector
from devicerl.runtime.exploration import TaskExploration

if TYPE_CHECKING:
    from devicerl.runtime.league.acting import LeagueActors

log = logging.getLogger(__name__)


class WeightMailbox:
    """The newest published weights and their version (thread-safe, newest wins)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._item: tuple[dict[str, Any] | None, int] | None = None
        self.version = 0
        self.published = threading.Event()

    def publish(self, weights: dict[str, Any] | None, version: int) -> None:
        """Offer ``weights`` as ``version`` (None: only the version moves, e.g. no learner)."""
        with self._lock:
            self._item = (weights, version)
            self.version = version
        self.published.set()

    def take(self) -> tuple[dict[str, Any] | None, int] | None:
        with self._lock:
            item, self._item = self._item, None
        return item


class CollectionSource(Protocol):
    """What the trainer consumes: finished episodes out, new weights in. Implemented by
    `BackgroundCollector` (this process) and `devicerl.runtime.cluster.fleet.RolloutFleet`
    (rollout groups on a Ray cluster)."""

    stats: dict[str, float]

    def start(self) -> CollectionSource: ...

    def get(self, timeout: float = 1.0) -> Trajectory | None: ...

    def publish(self, weights: dict[str, Any] | None, version: int) -> None: ...

    def stop(self, timeout: float = 60.0) -> list[Trajectory]:
        """Stop collecting; returns finished episodes that must still be stored."""
        ...


class BackgroundCollector:
    """Runs a `Collector` on its own thread and hands out finished trajectories."""

    def __init__(
        self,
        make_pool: Callable[[], EnvPool],
        policy: Policy | None,
        mailbox: WeightMailbox,
        *,
        judge: Any = None,
        max_ahead: int = 32,
        overlap: bool = True,
        batch: int = 16,
        exploration: TaskExploration | None = None,
        league: LeagueActors | None = None,
    ) -> None:
        """``league``: act with a league's policies (``policy`` None; their weights come
        through `LeagueActors.publish`, and the mailbox only moves versions)."""
        self.make_pool = make_pool
        self.league = league
        self.exploration = exploration
        self.policy = policy
        self.mailbox = mailbox
        self.judge = judge
        self.overlap = overlap
        self.batch = batch
        self.out: queue.Queue[Trajectory] = queue.Queue(maxsize=max(1, max_ahead))
        self.stop_event = threading.Event()
        self.error: BaseException | None = None
        self.stats: dict[str, float] = {}
        self._thread = threading.Thread(target=self._run, name="collector", daemon=True)

    def start(self) -> BackgroundCollector:
        self._thread.start()
        return self

    def _fresh_policy(self) -> Policy | None:
        item = self.mailbox.take()
        if item is None or self.policy is None:
            return None
        weights, version = item
        if weights is None:
            self.policy.version = version
        else:
            self.policy.set_weights(weights, version)
        return self.policy

    def _run(self) -> None:
        try:
            with self.make_pool() as pool:
                collector = Collector(
                    pool,
                    self.policy,
                    policy_source=self._fresh_policy,
                    judge=self.judge,
                    exploration=self.exploration,
                    league=self.league,
                )
                seen_version = self.mailbox.version
                episodes = collector.collect(None, stop=self.stop_event)
                for produced, traj in enumerate(episodes, start=1):
                    self.stats = collector.stats.as_dict()
                    if not self._put(traj):
                        break
                    if not self.overlap and produced % self.batch == 0:
                        self._wait_for_weights(seen_version)
                        seen_version = self.mailbox.version
        except DeviceRLError as e:  # a named failure (e.g. a refused key): one line, no trace
            log.info("collector thread stopped: %s", e)  # the learner raises it from `get`
            self.error = e
        except BaseException as e:  # surfaced to the learner by `get`
            log.exception("collector thread failed")
            self.error = e

    def _put(self, traj: Trajectory) -> bool:
        while not self.stop_event.is_set():
            try:
                self.out.put(traj, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def _wait_for_weights(self, seen_version: int) -> None:
        """Block until weights newer than ``seen_version`` are published (or stop)."""
        while not self.stop_event.is_set() and self.mailbox.version <= seen_version:
            self.mailbox.published.wait(0.2)
            self.mailbox.published.clear()

    def publish(self, weights: dict[str, Any] | None, version: int) -> None:
        """New weights for the collector (picked up between two batches)."""
        self.mailbox.publish(weights, version)

    def get(self, timeout: float = 1.0) -> Trajectory | None:
        """The next finished trajectory, or None after ``timeout`` (raises if the thread died)."""
        if self.error is not None:
            raise self.error
        try:
            return self.out.get(timeout=timeout)
        except queue.Empty:
            if self.error is not None:
                raise self.error from None
            if not self._thread.is_alive() and self.out.empty():
                raise RuntimeError("collector thread stopped") from None
            return None

    def stop(self, timeout: float = 60.0) -> list[Trajectory]:
        """Stop the thread (episodes still queued or running are dropped, as before)."""
        self.stop_event.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("collector thread did not stop within %.0fs", timeout)
        return []
