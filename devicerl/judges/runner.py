"""Asynchronous judging: a slow judge never blocks the devices.

The collector hands each finished trajectory to `JudgeRunner.submit`, which returns at once;
a thread pool (sized to the judge client's concurrency cap) judges in the background, and
`poll` hands back whatever is done, without waiting. The devices keep producing while a VLM
takes seconds per verdict; only the labelled output lags behind.

Unknown verdicts (the judge could not tell) are never silently counted as failures: the
trajectory comes back with ``usable=False`` and its native labels untouched, to keep in the store
for inspection but out of training and success statistics; `RunnerStats` counts them.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from devicerl.errors import AuthError
from devicerl.judges.apply import apply_verdict, judge_trajectory
from devicerl.judges.base import Judge, Verdict
from devicerl.records import Trajectory

log = logging.getLogger(__name__)


@dataclass
class Judged:
    """A judged trajectory. ``usable`` is False when its label is unknown (keep out of training)."""

    trajectory: Trajectory
    verdict: Verdict
    usable: bool


@dataclass
class RunnerStats:
    submitted: int = 0
    judged: int = 0
    success: int = 0
    failure: int = 0
    unknown: int = 0  #: verdicts the judge could not give
    dropped: int = 0  #: handed back with usable=False
    steps_cut: int = 0  #: steps removed after a per-step success
    judge_time_s: float = 0.0


class JudgeRunner:
    """``submit(trajectory)`` (never blocks) -> ``poll()`` / ``drain()`` -> `Judged` items."""

    def __init__(
        self,
        judge: Judge,
        *,
        per_step: bool = False,
        workers: int = 4,
    ) -> None:
        self.judge = judge
        self.per_step = per_step
        self.stats = RunnerStats()
        self._pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="judge")
        self._done: queue.SimpleQueue[Judged] = queue.SimpleQueue()
        self._pending = 0
        self._cv = threading.Condition()
        self._fatal: AuthError | None = None

    @property
    def pending(self) -> int:
        """Trajectories submitted and not yet judged."""
        with self._cv:
            return self._pending

    def submit(self, trajectory: Trajectory) -> None:
        """Queue a finished trajectory for judging; returns immediately. The runner owns it now."""
        with self._cv:
            self._pending += 1
            self.stats.submitted += 1
        self._pool.submit(self._run, trajectory)

    def poll(self) -> list[Judged]:
        """Everything judged since the last call (possibly nothing); never waits."""
        if self._fatal is not None:
            raise self._fatal
        out: list[Judged] = []
        while True:
            try:
                out.append(self._done.get_nowait())
            except queue.Empty:
                return out

    def drain(self, timeout: float | None = None) -> list[Judged]:
        """Wait until everything submitted is judged (or ``timeout`` passes), then `poll`."""
        with self._cv:
            self._cv.wait_for(lambda: self._pending == 0 or self._fatal is not None, timeout)
        return self.poll()

    def _run(self, trajectory: Trajectory) -> None:
        t0 = time.perf_counter()
        if self._fatal is not None:  # the endpoint refused the key: ask it nothing more
            with self._cv:
                self._pending -= 1
                self._cv.notify_all()
            return
        try:
            judged = self._judge(trajectory)
        except AuthError as e:  # every later call would fail too: the run must stop
            with self._cv:
                self._fatal = self._fatal or e
                self._pending -= 1
                self._cv.notify_all()
            return
        except Exception as e:  # a judge bug must not kill the stage or lose the trajectory
            log.exception("judge %s raised on %s", self.judge.name, trajectory)
            reason = f"judge raised {type(e).__name__}: {e}"
            verdict = Verdict.unknown(reason, judge=self.judge.name)
            judged = self._unknown(trajectory, verdict)
        with self._cv:
            self._count(judged, time.perf_counter() - t0)
            self._pending -= 1
            self._done.put(judged)
            self._cv.notify_all()

    def _judge(self, trajectory: Trajectory) -> Judged:
        verdict = judge_trajectory(self.judge, trajectory, self.per_step)
        if verdict.is_unknown:
            return self._unknown(trajectory, verdict)
        apply_verdict(trajectory, verdict)
        return Judged(trajectory, verdict, usable=True)

    def _unknown(self, trajectory: Trajectory, verdict: Verdict) -> Judged:
        apply_verdict(trajectory, verdict)
        return Judged(trajectory, verdict, usable=False)

    def _count(self, judged: Judged, seconds: float) -> None:
        s = self.stats
        s.judged += 1
        s.judge_time_s += seconds
        judgement = judged.trajectory.judgement
        s.unknown += judged.verdict.is_unknown
        s.dropped += not judged.usable
        s.steps_cut += judgement.cut_steps if judgement is not None else 0
        if judged.usable:
            s.success += bool(judged.verdict.success)
            s.failure += not judged.verdict.success

    def close(self, wait: bool = True) -> None:
        """Stop the threads (after finishing queued work when ``wait``)."""
        self._pool.shutdown(wait=wait, cancel_futures=not wait)

    def __enter__(self) -> JudgeRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
