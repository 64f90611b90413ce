"""Asynchronous judging: a slow judge never blocks the devices, and a failing one never keeps
the process alive.

`JudgeRunner.submit` hands a finished trajectory to a few judging threads and returns; `poll`
hands back whatever is done (or, with ``on_judged``, each is handed on as soon as it is
judged). Three bounds make a bad endpoint cost a known time:

- the queue: with ``max_pending`` trajectories submitted and not yet handed back, `submit`
  waits for room (the producer waits instead of piling up work for later);
- each episode's budget (`devicerl.judges.config.JudgeBudget`: failed attempts and seconds,
  over every request its judging makes); past it the verdict is unknown, with the reason;
- `close`: no new work; what is left gets ``grace_s`` seconds, then requests are cancelled
  and every trajectory not judged by then comes back at once, unlabelled with the reason.
  The threads are daemons: nothing left in them keeps the process alive.

Unknown verdicts (the judge could not tell) are never silently counted as failures: the
trajectory comes back with ``usable=False`` and its native labels untouched, to keep in the store
for inspection but out of training and success statistics; `RunnerStats` counts them.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from devicerl.clients.chat import CallBudget, call_budget
from devicerl.errors import AuthError
from devicerl.judges.apply import apply_verdict, detached, judge_trajectory
from devicerl.judges.base import Judge, Verdict
from devicerl.judges.config import JudgeBudget
from devicerl.records import Trajectory

log = logging.getLogger(__name__)

#: Seconds `close` waits for cancelled requests to give up before it stops waiting for them.
CANCEL_WAIT_S = 1.0
#: Why a trajectory left `close` unlabelled.
NOT_JUDGED = "not judged: the run ended before the judge got to it"
STILL_ANSWERING = "not judged: the run ended while the judge was still answering"


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
    left_at_close: int = 0  #: handed back unlabelled by `close`
    judge_time_s: float = 0.0


class JudgeRunner:
    """``submit(trajectory)`` -> ``poll()`` / ``drain()`` (or ``on_judged``) -> `Judged` items;
    ``close()`` ends it within seconds (see the module doc)."""

    def __init__(
        self,
        judge: Judge,
        *,
        per_step: bool = False,
        workers: int = 4,
        budget: JudgeBudget | None = None,
        max_pending: int | None = None,
        on_judged: Callable[[Judged], None] | None = None,
    ) -> None:
        """``budget``: each episode's (None: the chat client's own retries only);
        ``max_pending``: trajectories in the runner before `submit` waits (None: no bound);
        ``on_judged``: called from a judging thread with each judged trajectory (then `poll`
        hands back nothing)."""
        self.judge = judge
        self.per_step = per_step
        self.budget = budget
        self.max_pending = max_pending
        self.on_judged = on_judged
        self.stats = RunnerStats()
        self._done: queue.SimpleQueue[Judged] = queue.SimpleQueue()
        self._queue: deque[Trajectory] = deque()
        self._in_flight: dict[int, Trajectory] = {}
        self._pending = 0
        self._cv = threading.Condition()
        self._closed = False
        self._cancel = threading.Event()
        self._fatal: AuthError | None = None
        self._threads = [
            threading.Thread(target=self._work, name=f"judge-{i}", daemon=True)
            for i in range(max(1, workers))
        ]
        for thread in self._threads:
            thread.start()

    @property
    def pending(self) -> int:
        """Trajectories submitted and not yet handed back."""
        with self._cv:
            return self._pending

    def submit(
        self, trajectory: Trajectory, *, wait: bool = True, stop: threading.Event | None = None
    ) -> bool:
        """Queue a finished trajectory (the runner owns it now). With ``max_pending`` reached
        and ``wait``, first wait for room, unless ``stop`` (an event) is set: a trajectory is
        never refused for want of room. False when the runner is closed (nothing queued)."""
        with self._cv:
            if self._fatal is not None:
                raise self._fatal
            while (
                wait
                and self.max_pending is not None
                and self._pending >= self.max_pending
                and not self._closed
                and not (stop is not None and stop.is_set())
            ):
                self._cv.wait(0.1)
            if self._closed:
                return False
            self._pending += 1
            self.stats.submitted += 1
            self._queue.append(trajectory)
            self._cv.notify_all()
        return True

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

    def close(self, grace_s: float = 0.0) -> list[Judged]:
        """Take no more work; let what is queued or being judged finish for ``grace_s``
        seconds; then cancel the requests in flight and return, unlabelled with the reason,
        every trajectory not handed back by then (a copy, where a judging thread still holds
        it). Returns within about ``grace_s`` + `CANCEL_WAIT_S` seconds whatever the judge
        does."""
        with self._cv:
            if self._closed:
                return []
            self._closed = True
            self._cv.notify_all()
            self._cv.wait_for(lambda: self._pending == 0, grace_s)
        self._cancel.set()
        with self._cv:
            queued = list(self._queue)
            self._queue.clear()
            self._cv.wait_for(lambda: not self._in_flight, CANCEL_WAIT_S)
            held = list(self._in_flight.values())
            self._in_flight.clear()
            self._pending -= len(queued) + len(held)
            self._cv.notify_all()
        left = [self.left(t, NOT_JUDGED) for t in queued]
        return left + [self.left(detached(t), STILL_ANSWERING) for t in held]

    # -- the judging threads ---------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._cancel.is_set():
                    self._cv.wait(0.5)
                if self._cancel.is_set():
                    return
                trajectory = self._queue.popleft()
                self._in_flight[id(trajectory)] = trajectory
            judged = self._judge_one(trajectory)
            with self._cv:
                if self._in_flight.pop(id(trajectory), None) is None:
                    continue  # `close` handed it back already (a copy, unlabelled)
                self._count(judged)
            try:
                if self.on_judged is not None:
                    self.on_judged(judged)
                else:
                    self._done.put(judged)
            except Exception:  # the consumer's bug: keep judging the others
                log.exception("handing on judged %s failed", trajectory)
            finally:
                with self._cv:
                    self._pending -= 1
                    self._cv.notify_all()

    def _judge_one(self, trajectory: Trajectory) -> Judged:
        t0 = time.perf_counter()
        budget = self.budget.start(self._cancel) if self.budget else CallBudget(cancel=self._cancel)
        try:
            with call_budget(budget):
                verdict = judge_trajectory(self.judge, trajectory, self.per_step)
        except AuthError as e:  # every later call would fail too: the run must stop
            with self._cv:
                self._fatal = self._fatal or e
            verdict = Verdict.unknown(f"judge refused: {e}", judge=self.judge.name)
        except Exception as e:  # a judge bug must not kill the stage or lose the trajectory
            log.exception("judge %s raised on %s", self.judge.name, trajectory)
            reason = f"judge raised {type(e).__name__}: {e}"
            verdict = Verdict.unknown(reason, judge=self.judge.name)
        apply_verdict(trajectory, verdict)
        self.stats.judge_time_s += time.perf_counter() - t0
        return Judged(trajectory, verdict, usable=not verdict.is_unknown)

    def left(self, trajectory: Trajectory, reason: str) -> Judged:
        """``trajectory`` as handed back unjudged: unlabelled, with ``reason`` (counted)."""
        verdict = Verdict.unknown(reason, judge=self.judge.name)
        judged = Judged(apply_verdict(trajectory, verdict), verdict, usable=False)
        with self._cv:
            self._count(judged)
            self.stats.left_at_close += 1
        return judged

    def _count(self, judged: Judged) -> None:
        s = self.stats
        s.judged += 1
        judgement = judged.trajectory.judgement
        s.unknown += judged.verdict.is_unknown
        s.dropped += not judged.usable
        s.steps_cut += judgement.cut_steps if judgement is not None else 0
        if judged.usable:
            s.success += bool(judged.verdict.success)
            s.failure += not judged.verdict.success

    def __enter__(self) -> JudgeRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
