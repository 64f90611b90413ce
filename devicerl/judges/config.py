"""Judge configuration: one key (``judge.kind``) picks the task-native or the VLM judge
(`devicerl.judges.factory` builds it). An episode the judge cannot tell about (an unknown
verdict) stays out of training (`devicerl.judges.runner`). Each episode's judging has a budget
(`JudgeBudget`: the chat client's attempts, each ``chat.timeout_s`` at most).

Example (a ``judge:`` section of a run config, or ``devicerl judge-eval --set ...``)::

    judge:
      kind: vlm                 # native | vlm
      per_step: false           # judge every step (DigiRL) or only the finished episode
      chat: {base_url: http://127.0.0.1:8000/v1, model: Qwen2-VL-7B-Instruct,
             api_key_env: OPENAI_API_KEY, requests_per_minute: 60, max_concurrency: 4}
      vlm: {few_shot: judges/examples.yaml, cache_path: ~/.cache/devicerl/judge-cache.sqlite}
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Literal

from devicerl.clients.chat import CallBudget, ChatClient, ChatConfig
from devicerl.errors import ConfigError

DEFAULT_CACHE = "~/.cache/devicerl/judge-cache.sqlite"


@dataclass(frozen=True)
class JudgeBudget:
    """What judging one episode may spend: ``attempts`` failed requests in all (over every
    step it judges) and ``attempts x timeout_s`` seconds. Past it the verdict is unknown, with
    the reason, and the episode is stored unlabelled."""

    attempts: int
    timeout_s: float

    @property
    def seconds(self) -> float:
        return self.attempts * self.timeout_s

    def start(self, cancel: threading.Event | None = None) -> CallBudget:
        """The budget of an episode whose judging starts now."""
        return CallBudget(self.attempts, time.monotonic() + self.seconds, cancel)


@dataclass
class VLMJudgeConfig:
    """The VLM judge's few-shot examples and where it keeps its verdicts (it shows the last
    `devicerl.judges.vlm.LAST_SCREENS` screens)."""

    few_shot: str = field(
        default="", metadata={"help": "few-shot examples: a manifest (YAML/JSON) or a folder"}
    )
    cache_path: str = field(
        default=DEFAULT_CACHE, metadata={"help": "SQLite verdict cache; empty disables it"}
    )


@dataclass
class JudgeConfig:
    """Which judge labels success, and how its verdicts are applied."""

    kind: Literal["native", "vlm"] = field(
        default="native", metadata={"help": "native (the task's own check) or vlm"}
    )
    per_step: bool = field(
        default=False,
        metadata={"help": "judge each step in order and cut the episode at the first success"},
    )
    chat: ChatConfig = field(default_factory=ChatConfig)
    vlm: VLMJudgeConfig = field(default_factory=VLMJudgeConfig)

    def validate(self) -> None:
        if self.kind == "vlm" and not self.chat.model:
            raise ConfigError("judge.chat.model must name the model when judge.kind is vlm")

    @property
    def budget(self) -> JudgeBudget:
        """Each episode's: the chat client's attempts (its retries + 1), ``chat.timeout_s`` each."""
        return JudgeBudget(ChatClient.max_retries + 1, self.chat.timeout_s)

    @property
    def n_workers(self) -> int:
        """Judging threads: as many as requests the endpoint takes at once."""
        return self.chat.max_concurrency if self.kind == "vlm" else 1
