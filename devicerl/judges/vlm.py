"""The VLM judge: a vision-language model decides success from the last screenshots.

The model sees the task, the actions taken, the agent's answer to the user when it gave one
(`Trajectory.answer_by`) and the last `LAST_SCREENS` screens (plus optional few-shot examples)
through any OpenAI-compatible chat endpoint (vLLM, hosted APIs, Gemini's compatible endpoint)
and answers with a rationale and ``SUCCESS``/``FAILURE``. The shared
`ChatClient` provides the rate limit, the concurrency cap and bounded retries; the key comes
from an environment variable.

The actions are listed as ``Action.describe`` writes them (``tap(0.250, 0.500)``), or, with a
codec (`devicerl.codecs`; ``VLMJudge(..., codec=MobileUse())`` for a served Qwen2.5-VL), in the
judge model's own action language, coordinates in the frame of the screenshot its server sees.

Every call is keyed by a hash of the model, sampling parameters, prompt, examples and images and
looked up in a persistent `VerdictCache` first: judging the same screens again sends nothing.
Nothing here raises on a bad answer: an API failure or an unreadable reply becomes an
``unknown`` verdict with the reason.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from devicerl.clients.chat import ChatAuthError, ChatClient, ChatConfig, ChatError
from devicerl.codecs import ActionCodec
from devicerl.errors import DataError
from devicerl.judges.base import Judge, Label, Verdict, observation_after, screens_until
from devicerl.judges.cache import VerdictCache
from devicerl.judges.config import VLMJudgeConfig
from devicerl.judges.prompt import Example, build_prompt, parse_verdict, prompt_key, render
from devicerl.records import Step, Trajectory
from devicerl.secrets import scrub

log = logging.getLogger(__name__)


@dataclass
class VLMJudgeStats:
    """Counters for progress lines and reports."""

    calls: int = 0
    cache_hits: int = 0
    requests: int = 0
    unknown: int = 0


#: The most recent actions the prompt lists; the most recent screens it shows.
MAX_ACTIONS, LAST_SCREENS = 20, 3
#: How screenshots are encoded in requests.
IMAGE_FORMAT = "png"


class VLMJudge(Judge):
    """Judges from screenshots with a chat model; thread-safe. ``codec``: the action language
    the actions are listed in (None: `Action.describe`)."""

    name = "vlm"

    def __init__(
        self,
        chat: ChatConfig | ChatClient,
        config: VLMJudgeConfig | None = None,
        examples: Sequence[Example] | None = None,
        cache: VerdictCache | None = None,
        codec: ActionCodec | None = None,
    ) -> None:
        self.config = config or VLMJudgeConfig()
        self.codec = codec
        self.client = chat if isinstance(chat, ChatClient) else ChatClient(chat)
        self._owns_client = not isinstance(chat, ChatClient)
        if examples is None and self.config.few_shot:
            from devicerl.judges.fewshot import load_examples

            examples = load_examples(self.config.few_shot)
        self.examples = list(examples or ())
        self._owns_cache = cache is None and bool(self.config.cache_path)
        if self._owns_cache:
            cache = VerdictCache(self.config.cache_path)
        self.cache = cache
        self.stats = VLMJudgeStats()
        self._lock = threading.Lock()

    def _count(self, **kw: int) -> None:
        with self._lock:
            for k, v in kw.items():
                setattr(self.stats, k, getattr(self.stats, k) + v)

    def _request(self) -> dict[str, object]:
        c = self.client.config
        client = self.client
        return {
            "model": c.model,
            "temperature": client.temperature,
            "max_tokens": client.max_tokens,
        }

    def _judge_step(self, trajectory: Trajectory, index: int) -> Verdict:
        t0 = time.perf_counter()
        verdict = self._ask(trajectory, index)
        if verdict.is_unknown:
            self._count(unknown=1)
        return verdict.with_(latency_s=time.perf_counter() - t0)

    def _ask(self, trajectory: Trajectory, index: int) -> Verdict:
        self._count(calls=1)
        after = observation_after(trajectory, index)
        if after is None or after.screenshot is None:  # judging an older screen would mislead
            return Verdict.unknown(f"no screenshot after step {index} (device not rendering?)")
        screens = [o.screenshot for o in screens_until(trajectory, index)]
        shown = [s for s in screens if s is not None][-LAST_SCREENS:]
        steps = trajectory.steps[max(0, index + 1 - MAX_ACTIONS) : index + 1]
        actions = [self.action_text(s) for s in steps]
        answer = trajectory.answer_by(index)
        messages = build_prompt(
            trajectory.instruction, actions, shown, self.examples, answer=answer
        )
        key = prompt_key(messages, **self._request(), image_format=IMAGE_FORMAT)
        hit = self._cache_get(key)
        if hit is not None:
            self._count(cache_hits=1)
            return Verdict(hit[0], rationale=hit[1], cached=True)
        self._count(requests=1)
        try:
            reply = self.client.complete(render(messages, IMAGE_FORMAT))
        except ChatAuthError:
            raise  # no verdict can come from this endpoint: stop, do not label "unknown"
        except ChatError as e:
            return Verdict.unknown(f"judge API failed: {e}")
        label, rationale, reason = parse_verdict(reply.text)
        if label is Label.UNKNOWN:
            return Verdict.unknown(reason)
        self._cache_put(key, label, rationale)
        return Verdict(label, rationale=rationale)

    def action_text(self, step: Step) -> str:
        """A step's action as the prompt lists it."""
        if self.codec is None:
            return step.action.describe()
        return self.codec.format(step.action, self.codec.served_geometry(step.observation))

    def _cache_get(self, key: str) -> tuple[Label, str] | None:
        if self.cache is None:
            return None
        try:
            return self.cache.get(key)
        except DataError as e:  # a broken cache must not stop judging
            log.warning("%s; judging without it", e)
            return None

    def _cache_put(self, key: str, label: Label, rationale: str) -> None:
        if self.cache is None:
            return
        try:
            self.cache.put(key, label, scrub(rationale), self.client.config.model)
        except DataError as e:
            log.warning("%s; verdict not cached", e)

    def close(self) -> None:
        if self._owns_cache and self.cache is not None:
            self.cache.close()
        if self._owns_client:
            self.client.close()
