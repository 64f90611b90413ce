"""An agent behind any OpenAI-compatible chat-completions endpoint (vLLM, hosted APIs, Gemini).

Each observation becomes one request in the action language of a codec (`devicerl.codecs`; by
default AutoUI's text, `AutoUICodec`: a system prompt generated from the action docs, the
instruction, previous actions (``Observation.previous_actions``), optionally the UI element list,
and the screenshot, when the observation has one, as an image part); the codec reads the reply.
An endpoint serving a GUI model gets that model's own codec (``APIAgent(codec=MobileUse())``
for a served Qwen2.5-VL): its prompt, and coordinates through the geometry the server's
processor makes of the screenshot, sent as is (the codec's ``served`` resize).
A request that fails after the client's bounded
retries (`ChatError`) or a reply that does not parse becomes an invalid action with the reason
(the device treats it as a no-op); `act` never raises for a bad endpoint. A batch is sent
concurrently from threads, bounded by the client's concurrency cap. The API key is read from the
environment variable named in ``ChatConfig.api_key_env``.

A failing endpoint costs each episode a bounded time, not each action: an episode's requests
share one failure budget (as many failed attempts in all as the client makes for one request,
its retries + 1, each ``chat.timeout_s`` at most; the collector names each observation's
episode). Once it is spent the episode's remaining
actions are invalid at once, without a request, with the reason; a later episode starts with a
fresh budget. `close` cancels what is in flight.

It has no log-probabilities: ``trainable`` is False, `log_prob` raises a clear error and
trainers refuse it (`require_trainable`); evaluation and data collection work.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from devicerl.actions import Action
from devicerl.agents.base import ActionSample, Policy
from devicerl.clients.chat import (
    CallBudget,
    ChatAuthError,
    ChatClient,
    ChatConfig,
    ChatError,
    call_budget,
    image_part,
)
from devicerl.codecs import ActionCodec, AutoUICodec, PromptStep, openai_messages
from devicerl.errors import ConfigError
from devicerl.records import Observation

#: Longest UI-element list in a prompt.
MAX_ELEMENTS = 50
#: Episodes whose budgets are remembered (the oldest are forgotten: they ended long ago).
MAX_EPISODES = 4096


@dataclass
class APIAgentConfig:
    """The endpoint the API agent sends to (``agent.api``).

    The screenshot is sent whenever the observation has one; a run that wants none configures
    its devices without screenshots (``env.options: {screenshot: false}`` for browser and
    Android devices, ``{render: false}`` for synthetic ones). What else a request holds is the
    agent's own settings (`APIAgent`; a run's ``agent.history``, ``agent.include_elements``,
    ``agent.temperature``)."""

    chat: ChatConfig = field(default_factory=ChatConfig)

    def validate(self) -> None:
        self.chat.validate()


class APIAgent(Policy):
    """Queries a chat-completions endpoint per observation (see the module doc).

    ``history``: previous actions in the prompt; ``include_elements``: list up to
    `MAX_ELEMENTS` UI elements as text; ``temperature``: sampling temperature (0: greedy);
    ``codec``: the action language (None: AutoUI's)."""

    trainable = False
    uses_episodes = True  #: `act` gets each observation's episode key (``episodes=``)

    @property
    def uses_history(self) -> bool:  # type: ignore[override]
        return self.history > 0

    def __init__(
        self,
        config: APIAgentConfig | None = None,
        client: ChatClient | None = None,
        *,
        temperature: float = 0.0,
        history: int = 4,
        include_elements: bool = True,
        codec: ActionCodec | None = None,
    ) -> None:
        if temperature < 0 or history < 0:
            raise ConfigError(
                f"the API agent's temperature ({temperature}) and history ({history}) must be >= 0"
            )
        self.config = config or APIAgentConfig()
        self.config.validate()
        self.temperature = float(temperature)
        self.history = int(history)
        self.include_elements = bool(include_elements)
        self.client = client or ChatClient(self.config.chat, temperature=self.temperature)
        self.codec = codec or AutoUICodec()
        self._budgets: OrderedDict[Hashable, CallBudget] = OrderedDict()
        self._lock = threading.Lock()
        self._cancel = threading.Event()

    def budget(self, episode: Hashable | None) -> CallBudget:
        """The failure budget of ``episode`` (None: a fresh one, for this action alone)."""
        attempts = self.client.max_retries + 1
        if episode is None:
            return CallBudget(attempts, cancel=self._cancel)
        with self._lock:
            budget = self._budgets.get(episode)
            if budget is None:
                budget = self._budgets[episode] = CallBudget(attempts, cancel=self._cancel)
                if len(self._budgets) > MAX_EPISODES:
                    self._budgets.popitem(last=False)
            return budget

    def messages(self, obs: Observation) -> list[dict[str, Any]]:
        """The chat messages for one observation."""
        geometry = self.codec.served_geometry(obs)
        prev = tuple(obs.previous_actions)[-self.history :] if self.history > 0 else ()
        elements = ""
        if self.include_elements and obs.elements:
            elements = self.codec.elements_text(obs, geometry, MAX_ELEMENTS)
        has_image = obs.screenshot is not None
        step = PromptStep(obs.instruction, geometry, prev, elements, has_image)
        chat = self.codec.chat(step, self.codec.system(geometry))
        image = image_part(obs.screenshot, "png") if obs.screenshot is not None else None
        return openai_messages(chat, image)

    def _one(self, obs: Observation, greedy: bool, episode: Hashable | None) -> ActionSample:
        t0 = time.perf_counter()
        params = {"temperature": 0.0} if greedy else {}
        budget = self.budget(episode)
        spent = budget.spent()
        if spent is not None:  # this episode's endpoint failures used up its budget
            reason = f"API not asked: {spent} in this episode"
            return ActionSample(Action.invalid("", reason), None, None, {"error": reason})
        try:
            with call_budget(budget):
                reply = self.client.complete(self.messages(obs), **params)
        except ChatAuthError:
            raise  # every later request would fail too: stop the run
        except ChatError as e:
            reason = f"API request failed: {e}"
            return ActionSample(Action.invalid("", reason), None, None, {"error": str(e)})
        except Exception as e:
            reason = f"API agent error: {type(e).__name__}: {e}"
            return ActionSample(Action.invalid("", reason), None, None, {"error": reason})
        extras = {
            "attempts": reply.attempts,
            "latency_s": time.perf_counter() - t0,
            "usage": reply.usage,
        }
        action = self.codec.parse(reply.text, self.codec.served_geometry(obs))
        return ActionSample(action, reply.text, None, extras)

    def act(
        self,
        observations: Sequence[Observation],
        greedy: bool = False,
        epsilon: Sequence[float] | None = None,
        episodes: Sequence[Hashable] | None = None,
    ) -> list[ActionSample]:
        """``episodes``: each observation's episode key (its failure budget's)."""
        keys = list(episodes) if episodes is not None else [None] * len(observations)
        if len(observations) <= 1:
            return [self._one(o, greedy, k) for o, k in zip(observations, keys)]
        # one daemon thread per request (the client caps how many are in flight): a request
        # still waiting on a dead endpoint never keeps the process alive
        out: list[Any] = [None] * len(observations)
        errors: list[BaseException] = []

        def one(i: int) -> None:
            try:
                out[i] = self._one(observations[i], greedy, keys[i])
            except BaseException as e:  # an auth error: raised in the caller's thread
                errors.append(e)

        threads = [
            threading.Thread(target=one, args=(i,), name="api-agent", daemon=True)
            for i in range(len(observations))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]
        return out

    def close(self) -> None:
        """Cancel the requests in flight (their actions come back invalid) and close."""
        self._cancel.set()
        self.client.close()
