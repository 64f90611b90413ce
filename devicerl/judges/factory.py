"""Builds judges and judging stages from a `JudgeConfig` (as `devicerl.agents.factory` does for
agents), so the configuration module stays free of the classes it describes."""

from __future__ import annotations

from devicerl.judges.base import Judge
from devicerl.judges.config import JudgeConfig
from devicerl.judges.native import NativeJudge
from devicerl.judges.runner import JudgeRunner
from devicerl.judges.vlm import VLMJudge


def make_judge(config: JudgeConfig) -> Judge:
    """The judge that ``config.kind`` names."""
    config.validate()
    if config.kind == "native":
        return NativeJudge()
    return VLMJudge(config.chat, config.vlm)


def make_runner(config: JudgeConfig, judge: Judge | None = None) -> JudgeRunner:
    """An asynchronous judging stage for ``config`` (builds the judge unless given)."""
    return JudgeRunner(
        judge or make_judge(config),
        per_step=config.per_step,
        workers=config.n_workers,
    )
