"""The judging stage: where a finished episode gets its final label, once, on its way from the
devices to the trainer.

Episodes arrive unjudged, from a collector in this process or from rollout groups on other
nodes; a `JudgingStage` hands each to the run's judge (`devicerl.judges.JudgeRunner`, built
from the ``judge:`` config; none for the task-native judge, whose labels the device already
set) and each labelled episode on to ``deliver``. It is also where the planner learns how
episodes ended, since only here is the label final: ``on_episode`` gets every complete,
labelled episode (the exploration schedule counts it), ``on_incomplete`` every other one (a
group member to re-run).

It is bounded: with the judge's queue full, `put` waits (the collector waits with it, its
devices idle) instead of piling up verdicts to send after the run. `close` ends it within
seconds of the run's end: what the judge did not answer by then comes back unlabelled, with
the reason (`devicerl.judges.runner`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator

from devicerl.judges import JudgeConfig, Judged, JudgeRunner, is_labelled, make_runner
from devicerl.judges.runner import NOT_JUDGED
from devicerl.records import Trajectory

#: Seconds the judge gets at the end of a run for the verdicts it is working on.
STOP_GRACE_S = 5.0


class JudgingStage:
    """Judges each finished episode once and hands it on (see the module doc)."""

    def __init__(
        self,
        config: JudgeConfig,
        deliver: Callable[[Trajectory], None],
        *,
        on_episode: Callable[[Trajectory], None] | None = None,
        on_incomplete: Callable[[Trajectory], None] | None = None,
    ) -> None:
        """``deliver`` is called with each labelled episode, from a judging thread (or from
        the caller of `put` when the device's labels stand)."""
        self.deliver = deliver
        self.on_episode = on_episode
        self.on_incomplete = on_incomplete
        self.runner: JudgeRunner | None = None
        if config.kind != "native":
            self.runner = make_runner(config, on_judged=self._judged)

    @property
    def pending(self) -> int:
        """Episodes in the stage (waiting for or being given their verdict)."""
        return self.runner.pending if self.runner is not None else 0

    def put(self, t: Trajectory, *, wait: bool = True, stop: threading.Event | None = None) -> None:
        """Judge ``t``, then deliver it. With the judge's queue full, waits for room when
        ``wait`` (unless ``stop`` is set); an episode is never dropped (once the stage is
        closed it is delivered unlabelled at once). An episode with no step to look at (lost
        with its node) passes unjudged."""
        if self.runner is None or not t.steps:
            self._out(t)
        elif not self.runner.submit(t, wait=wait, stop=stop):
            self._out(self.runner.left(t, NOT_JUDGED).trajectory)

    def _judged(self, judged: Judged) -> None:
        self._out(judged.trajectory)

    def _out(self, t: Trajectory) -> None:
        complete = not t.is_truncated and is_labelled(t)
        hook = self.on_episode if complete else self.on_incomplete
        if hook is not None:
            hook(t)
        self.deliver(t)

    def drain(self) -> None:
        """Wait until every episode put was delivered (each within its judging budget)."""
        if self.runner is not None:
            self.runner.drain(None)

    def close(self, grace_s: float = STOP_GRACE_S) -> list[Trajectory]:
        """Stop within about ``grace_s`` seconds; returns the episodes not delivered, each
        unlabelled with the reason (store them: they are finished episodes)."""
        if self.runner is None:
            return []
        return [j.trajectory for j in self.runner.close(grace_s)]


def judge_each(episodes: Iterable[Trajectory], config: JudgeConfig) -> Iterator[Trajectory]:
    """``episodes`` (e.g. `Collector.collect`), each labelled by the judge ``config`` names, in
    the caller's thread: the judge works while the next episodes are made, and when they run
    out the ones still being judged are waited for (each within its budget). Leaving early
    closes the stage at once."""
    judged: queue.SimpleQueue[Trajectory] = queue.SimpleQueue()
    stage = JudgingStage(config, judged.put)
    try:
        for t in episodes:
            stage.put(t)
            while not judged.empty():
                yield judged.get()
        stage.drain()
        while not judged.empty():
            yield judged.get()
    finally:
        stage.close(0.0)
