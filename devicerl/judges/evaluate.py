"""Measuring a judge against ground truth: confusion matrix, accuracy, error rates, unknowns.

Ground truth per trajectory (`ground_truth`): a human label (``Trajectory.ground_truth``) when
present, else the task's own success check of a complete episode (the device's outcome before
any judge relabelled it, ``Judgement.native_success``). Episodes cut short by
infrastructure have no ground truth and are counted as ``no_truth``.

Accuracy, false-positive and false-negative rates are over definite verdicts; unknown verdicts
are reported separately (``unknown`` and ``coverage``), never folded into either class.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from devicerl.judges.base import Judge, Verdict
from devicerl.records import Trajectory


def ground_truth(trajectory: Trajectory) -> bool | None:
    """The label to measure judges against, or None when there is none."""
    if trajectory.ground_truth is not None:
        return trajectory.ground_truth
    if trajectory.is_complete and not trajectory.is_truncated:
        judgement = trajectory.judgement
        return judgement.native_success if judgement is not None else trajectory.success
    return None


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


@dataclass
class JudgeReport:
    """Agreement of a judge with ground truth (positive = success)."""

    judge: str
    tp: int = 0
    fp: int = 0
    tn: int = 0
    fn: int = 0
    unknown_pos: int = 0  #: unknown verdicts on episodes that truly succeeded
    unknown_neg: int = 0  #: unknown verdicts on episodes that truly failed
    no_truth: int = 0  #: episodes skipped for lack of ground truth
    cached: int = 0
    latency_s: float = 0.0  #: total time spent in the judge
    elapsed_s: float = 0.0
    unknown_reasons: dict[str, int] = field(default_factory=dict)
    per_task: dict[str, dict[str, int]] = field(default_factory=dict)
    mistakes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def unknown(self) -> int:
        return self.unknown_pos + self.unknown_neg

    @property
    def judged(self) -> int:
        return self.tp + self.fp + self.tn + self.fn

    @property
    def n(self) -> int:
        return self.judged + self.unknown

    @property
    def accuracy(self) -> float | None:
        return _ratio(self.tp + self.tn, self.judged)

    @property
    def error_rate(self) -> float | None:
        return None if self.accuracy is None else 1.0 - self.accuracy

    @property
    def false_positive_rate(self) -> float | None:
        return _ratio(self.fp, self.fp + self.tn)

    @property
    def false_negative_rate(self) -> float | None:
        return _ratio(self.fn, self.fn + self.tp)

    @property
    def precision(self) -> float | None:
        return _ratio(self.tp, self.tp + self.fp)

    @property
    def coverage(self) -> float | None:
        return _ratio(self.judged, self.n)

    def record(self, trajectory: Trajectory, truth: bool, verdict: Verdict) -> None:
        task = self.per_task.setdefault(trajectory.task, {"n": 0, "correct": 0, "unknown": 0})
        task["n"] += 1
        self.cached += verdict.cached
        self.latency_s += verdict.latency_s
        if verdict.is_unknown:
            task["unknown"] += 1
            self.unknown_pos += truth
            self.unknown_neg += not truth
            reason = verdict.reason[:80]
            self.unknown_reasons[reason] = self.unknown_reasons.get(reason, 0) + 1
            return
        said = bool(verdict.success)
        self.tp += said and truth
        self.fp += said and not truth
        self.tn += not said and not truth
        self.fn += not said and truth
        task["correct"] += said == truth
        if said != truth and len(self.mistakes) < 50:
            self.mistakes.append(
                {
                    "episode_id": trajectory.episode_id,
                    "task": trajectory.task,
                    "instruction": trajectory.instruction,
                    "truth": truth,
                    "rationale": verdict.rationale,
                }
            )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("n", "judged", "unknown", "accuracy", "error_rate", "precision", "coverage"):
            d[k] = getattr(self, k)
        d["false_positive_rate"] = self.false_positive_rate
        d["false_negative_rate"] = self.false_negative_rate
        return d

    def format(self) -> str:
        """A plain-text report: confusion matrix, rates, unknowns."""

        def pct(x: float | None) -> str:
            return "n/a" if x is None else f"{100 * x:.1f} %"

        lines = [
            f"judge: {self.judge}   episodes with ground truth: {self.n}"
            f"   (skipped without: {self.no_truth})",
            "",
            "                 judge: success   failure   unknown",
            f"truth: success  {self.tp:14d} {self.fn:9d} {self.unknown_pos:9d}",
            f"truth: failure  {self.fp:14d} {self.tn:9d} {self.unknown_neg:9d}",
            "",
            f"accuracy {pct(self.accuracy)}   error {pct(self.error_rate)}"
            f"   false-positive rate {pct(self.false_positive_rate)}"
            f"   false-negative rate {pct(self.false_negative_rate)}",
            f"unknown {self.unknown} (coverage {pct(self.coverage)})   cached {self.cached}"
            f"   judge time {self.latency_s:.1f} s   wall {self.elapsed_s:.1f} s",
        ]
        for reason, count in Counter(self.unknown_reasons).most_common(5):
            lines.append(f"  unknown x{count}: {reason}")
        return "\n".join(lines)


def _bounded_map(
    pool: ThreadPoolExecutor, fn: Callable[[Any], Any], items: Iterable[Any], window: int
) -> Iterator[Any]:
    """Like ``pool.map`` (results in order) but reading ``items`` lazily: at most ``window``
    in flight, so a large data set is never loaded into memory at once."""
    inflight: deque[Future[Any]] = deque()
    for item in items:
        inflight.append(pool.submit(fn, item))
        if len(inflight) >= window:
            yield inflight.popleft().result()
    while inflight:
        yield inflight.popleft().result()


def evaluate_judge(
    judge: Judge,
    trajectories: Iterable[Trajectory],
    *,
    workers: int = 4,
    truth: Callable[[Trajectory], bool | None] = ground_truth,
    progress: Callable[[JudgeReport, Trajectory], None] | None = None,
) -> JudgeReport:
    """Judge every trajectory that has ground truth (``workers`` at a time) and compare.

    ``progress(report, trajectory)`` is called after each trajectory, in input order.
    """
    report = JudgeReport(judge.name)
    t0 = time.perf_counter()

    def one(t: Trajectory) -> tuple[Trajectory, bool | None, Verdict | None]:
        gt = truth(t)
        return t, gt, (judge.judge(t) if gt is not None else None)

    with ThreadPoolExecutor(max(1, workers), thread_name_prefix="judge-eval") as pool:
        for t, gt, verdict in _bounded_map(pool, one, trajectories, 2 * max(1, workers)):
            if gt is None or verdict is None:
                report.no_truth += 1
            else:
                report.record(t, gt, verdict)
            if progress is not None:
                progress(report, t)
    report.elapsed_s = time.perf_counter() - t0
    return report
