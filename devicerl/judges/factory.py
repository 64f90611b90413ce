"""Builds judges and judging stages from a `JudgeConfig` (as `devicerl.agents.factory` does for
agents), so the configuration module stays free of the classes it describes."""

from __future__ import annotations

from collections.abc import Callable

from devicerl.judges.base import Judge
from devicerl.judges.config import JudgeConfig
from devicerl.judges.native import NativeJudge
from devicerl.judges.runner import Judged, JudgeRunner
from devicerl.judges.vlm import VLMJudge

#: Episodes a judging thread may have waiting for it before the producer waits.
PENDING_PER_WORKER = 2


def make_judge(config: JudgeConfig) -> Judge:
    """The judge that ``config.kind`` names."""
    config.validate()
    if config.kind == "native":
        return NativeJudge()
    return VLMJudge(config.chat, config.vlm)


def make_runner(
    config: JudgeConfig,
    judge: Judge | None = None,
    on_judged: Callable[[Judged], None] | None = None,
) -> JudgeRunner:
    """An asynchronous judging stage for ``config`` (builds the judge unless given): each
    episode within ``config.budget``, at most `PENDING_PER_WORKER` episodes per judging thread
    waiting before `JudgeRunner.submit` waits."""
    return JudgeRunner(
        judge or make_judge(config),
        per_step=config.per_step,
        workers=config.n_workers,
        budget=config.budget,
        max_pending=PENDING_PER_WORKER * config.n_workers,
        on_judged=on_judged,
    )
