"""Collection sources: where the trainer gets finished episodes from, and sends policies to.

`CollectorThread` runs a `Collector` on its own thread and hands every finished episode to a
``put`` callable; the in-process `BackgroundCollector` (below) and a Ray rollout group
(`devicerl.runtime.cluster.rollout_group`) both run it and differ only in where episodes go.
Two throttles bound how stale data can get without wasting device time on data that would be
thrown away:

- the sink applies back-pressure (``put`` blocks while enough finished episodes wait);
- ``overlap=False``: the thread pauses after each batch of ``batch`` episodes until the trainer
  publishes a newer policy version (DigiRL's collect-then-learn rhythm, for comparison).

`BackgroundCollector` is the in-process source: collector thread -> judging stage
(`devicerl.runtime.acting.judging`) -> a bounded queue the trainer reads.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Protocol

from devicerl.errors import DeviceRLError
from devicerl.judges import JudgeConfig
from devicerl.pool.pool import EnvPool
from devicerl.records import Trajectory
from devicerl.runtime.acting.collector import Collector
from devicerl.runtime.acting.copies import ActingCopies, Published
from devicerl.runtime.acting.judging import JudgingStage

log = logging.getLogger(__name__)


class CollectionSource(Protocol):
    """What the trainer consumes: finished, judged episodes out, new policies in. Implemented
    by `BackgroundCollector` (this process) and `devicerl.runtime.cluster.fleet.RolloutFleet`
    (rollout groups on a Ray cluster)."""

    stats: dict[str, float]

    def start(self) -> CollectionSource: ...

    def get(self, timeout: float = 1.0) -> Trajectory | None: ...

    def publish(self, roster: dict[str, Published], version: int) -> None: ...

    def stop(self, timeout: float = 60.0) -> list[Trajectory]:
        """Stop collecting (judging ends within seconds); returns finished episodes that must
        still be stored."""
        ...


class CollectorThread:
    """The collector loop on its own thread (see the module doc)."""

    def __init__(
        self,
        make_pool: Callable[[], EnvPool],
        copies: ActingCopies,
        put: Callable[[Trajectory], bool],
        *,
        overlap: bool = True,
        batch: int = 16,
        paused: Callable[[], bool] | None = None,
        name: str = "collector",
    ) -> None:
        """``put`` hands an episode on (False: stop); ``paused``: hold collection while true."""
        self.make_pool = make_pool
        self.copies = copies
        self.put = put
        self.overlap = overlap
        self.batch = batch
        self.paused = paused
        self.stop_event = threading.Event()
        self.resume = threading.Event()
        self.error: BaseException | None = None
        self.collector: Collector | None = None
        self.pool: EnvPool | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> CollectorThread:
        self._thread.start()
        return self

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        try:
            with self.make_pool() as pool:
                self.pool = pool
                self.collector = Collector(pool, self.copies)
                seen = self.copies.version
                episodes = self.collector.collect(None, stop=self.stop_event)
                for produced, traj in enumerate(episodes, start=1):
                    if not self.put(traj):
                        break
                    if not self.overlap and produced % self.batch == 0:
                        self.copies.wait_newer(seen, self.stop_event)
                        seen = self.copies.version
                    self._hold()
        except DeviceRLError as e:  # a named failure (e.g. a refused key): one line, no trace
            log.info("collector thread stopped: %s", e)  # the consumer raises it
            self.error = e
        except BaseException as e:  # surfaced to the consumer
            log.exception("collector thread failed")
            self.error = e
        finally:
            self.pool = None

    def _hold(self) -> None:
        while self.paused is not None and self.paused() and not self.stop_event.is_set():
            self.resume.wait(0.2)
            self.resume.clear()

    def stop(self, timeout: float = 60.0) -> None:
        self.stop_event.set()
        self.resume.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("collector thread did not stop within %.0fs", timeout)


class BackgroundCollector:
    """A `CollectorThread` in this process whose episodes pass the judging stage into a
    bounded queue (``max_ahead`` episodes) the trainer reads."""

    def __init__(
        self,
        make_pool: Callable[[], EnvPool],
        copies: ActingCopies,
        *,
        judge: JudgeConfig | None = None,
        on_episode: Callable[[Trajectory], None] | None = None,
        on_incomplete: Callable[[Trajectory], None] | None = None,
        max_ahead: int = 32,
        overlap: bool = True,
        batch: int = 16,
    ) -> None:
        """``on_episode`` / ``on_incomplete``: the judging stage's hooks (the planner's)."""
        self.copies = copies
        self.max_ahead = max(1, max_ahead)
        self.out: deque[Trajectory] = deque()
        self._cv = threading.Condition()
        self.thread = CollectorThread(make_pool, copies, self._judge, overlap=overlap, batch=batch)
        self.stage = JudgingStage(
            judge or JudgeConfig(),
            self._queue,
            on_episode=on_episode,
            on_incomplete=on_incomplete,
        )

    @property
    def stats(self) -> dict[str, float]:
        collector = self.thread.collector
        out = collector.stats.as_dict() if collector is not None else {}
        return {**out, "judge/pending": float(self.stage.pending)}

    def start(self) -> BackgroundCollector:
        self.thread.start()
        return self

    def _judge(self, traj: Trajectory) -> bool:
        self.stage.put(traj, stop=self.thread.stop_event)
        return not self.thread.stop_event.is_set()

    def _queue(self, traj: Trajectory) -> None:
        """Into the queue; waits while it is full, unless collection is stopping (then
        nothing finished may be dropped)."""
        with self._cv:
            while len(self.out) >= self.max_ahead and not self.thread.stop_event.is_set():
                self._cv.wait(0.2)
            self.out.append(traj)
            self._cv.notify_all()

    def publish(self, roster: dict[str, Published], version: int) -> None:
        """New policies for the collector (picked up between two batches)."""
        self.copies.publish(roster, version)

    def get(self, timeout: float = 1.0) -> Trajectory | None:
        """The next judged trajectory, or None after ``timeout`` (raises if the thread died)."""
        if self.thread.error is not None:
            raise self.thread.error
        with self._cv:
            if not self.out:
                self._cv.wait(timeout)
            if self.out:
                traj = self.out.popleft()
                self._cv.notify_all()
                return traj
        if self.thread.error is not None:
            raise self.thread.error
        if not self.thread.alive and not self.stage.pending:
            raise RuntimeError("collector thread stopped")
        return None

    def stop(self, timeout: float = 60.0) -> list[Trajectory]:
        """Stop the thread (episodes still running are dropped), then the judging stage
        (within seconds); returns the finished episodes the trainer did not take."""
        self.thread.stop(timeout)
        left = self.stage.close()
        with self._cv:
            queued, self.out = list(self.out), deque()
        return queued + left
