"""Acting beside learning: the one collector thread loop, and the in-process collection source.

`CollectorThread` runs a `Collector` on its own thread and hands every finished episode to a
``put`` callable; the in-process `BackgroundCollector` (below) and a Ray rollout group
(`devicerl.runtime.cluster.group`) both run it and differ only in where episodes go. Two
throttles bound how stale data can get without wasting device time on data that would be
thrown away:

- the sink applies back-pressure (``put`` blocks while enough finished episodes wait);
- ``overlap=False``: the thread pauses after each batch of ``batch`` episodes until the trainer
  publishes a newer policy version (DigiRL's collect-then-learn rhythm, for comparison).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, Protocol

from devicerl.errors import DeviceRLError
from devicerl.pool.pool import EnvPool
from devicerl.records import Trajectory
from devicerl.runtime.acting.collector import Collector
from devicerl.runtime.acting.copies import ActingCopies, Published

log = logging.getLogger(__name__)


class CollectionSource(Protocol):
    """What the trainer consumes: finished episodes out, new policies in. Implemented by
    `BackgroundCollector` (this process) and `devicerl.runtime.cluster.fleet.RolloutFleet`
    (rollout groups on a Ray cluster)."""

    stats: dict[str, float]

    def start(self) -> CollectionSource: ...

    def get(self, timeout: float = 1.0) -> Trajectory | None: ...

    def publish(self, roster: dict[str, Published], version: int) -> None: ...

    def stop(self, timeout: float = 60.0) -> list[Trajectory]:
        """Stop collecting; returns finished episodes that must still be stored."""
        ...


class CollectorThread:
    """The collector loop on its own thread (see the module doc)."""

    def __init__(
        self,
        make_pool: Callable[[], EnvPool],
        copies: ActingCopies,
        put: Callable[[Trajectory], bool],
        *,
        judge: Any = None,
        on_episode: Callable[[Trajectory], None] | None = None,
        on_incomplete: Callable[[Trajectory], None] | None = None,
        overlap: bool = True,
        batch: int = 16,
        paused: Callable[[], bool] | None = None,
        name: str = "collector",
    ) -> None:
        """``put`` hands an episode on (False: stop); ``paused``: hold collection while true."""
        self.make_pool = make_pool
        self.copies = copies
        self.put = put
        self.judge = judge
        self.on_episode = on_episode
        self.on_incomplete = on_incomplete
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
                self.collector = Collector(
                    pool,
                    self.copies,
                    judge=self.judge,
                    on_episode=self.on_episode,
                    on_incomplete=self.on_incomplete,
                )
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
    """A `CollectorThread` in this process, handing episodes out through a bounded queue."""

    def __init__(
        self,
        make_pool: Callable[[], EnvPool],
        copies: ActingCopies,
        *,
        judge: Any = None,
        on_episode: Callable[[Trajectory], None] | None = None,
        on_incomplete: Callable[[Trajectory], None] | None = None,
        max_ahead: int = 32,
        overlap: bool = True,
        batch: int = 16,
    ) -> None:
        self.copies = copies
        self.out: queue.Queue[Trajectory] = queue.Queue(maxsize=max(1, max_ahead))
        self.thread = CollectorThread(
            make_pool,
            copies,
            self._put,
            judge=judge,
            on_episode=on_episode,
            on_incomplete=on_incomplete,
            overlap=overlap,
            batch=batch,
        )

    @property
    def stats(self) -> dict[str, float]:
        collector = self.thread.collector
        return collector.stats.as_dict() if collector is not None else {}

    def start(self) -> BackgroundCollector:
        self.thread.start()
        return self

    def _put(self, traj: Trajectory) -> bool:
        while not self.thread.stop_event.is_set():
            try:
                self.out.put(traj, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def publish(self, roster: dict[str, Published], version: int) -> None:
        """New policies for the collector (picked up between two batches)."""
        self.copies.publish(roster, version)

    def get(self, timeout: float = 1.0) -> Trajectory | None:
        """The next finished trajectory, or None after ``timeout`` (raises if the thread died)."""
        if self.thread.error is not None:
            raise self.thread.error
        try:
            return self.out.get(timeout=timeout)
        except queue.Empty:
            if self.thread.error is not None:
                raise self.thread.error from None
            if not self.thread.alive and self.out.empty():
                raise RuntimeError("collector thread stopped") from None
            return None

    def stop(self, timeout: float = 60.0) -> list[Trajectory]:
        """Stop the thread (episodes still queued or running are dropped, as before)."""
        self.thread.stop(timeout)
        return []
