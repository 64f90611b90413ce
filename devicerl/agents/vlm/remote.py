"""A vision-language policy served by an OpenAI-compatible inference server (vLLM, SGLang).

`ServedPolicy` sends each observation as one ``/v1/chat/completions`` request with the same chat
the local model sees (the agent's codec; the screenshot, resized as the agent resizes it, as a
lossless PNG; the reply read by the codec through the geometry the local processor would make
of it, which the server's processor of the same model makes too), ``logprobs: true`` and the
agent's sampling settings (plain sampling at its temperature, ``top_p`` 1, ``max_tokens`` its
``max_new_tokens``; ``temperature`` 0 for greedy). The sample's log-prob
is the sum of the returned per-token log-probs (end-of-sequence included, as vLLM returns it).
For them to be the log-probs of the sampling distribution, run vLLM with
``--logprobs-mode processed_logprobs`` (its default, ``raw_logprobs``, is at temperature 1).
With `TOKEN_IDS` (vLLM's ``return_tokens_as_token_ids``) a sample whose tokens are not its
text's canonical tokens, or that stopped at ``max_tokens``, is marked in ``extras["rescored"]``
like a local one, but keeps the server's log-prob (the model is not loaded to rescore it).

Weights reach the server after each new policy version (`push`, called by
`VLMAgent.set_weights`, and before acting by a copy whose loaded weights are newer than the
served ones, such as a learner's actor being evaluated): ``sync: lora`` writes the adapter
(peft's layout, from the published weights alone) to
``weights_dir/<ADAPTER_PREFIX>-<id>-v<version>`` and posts it to ``/v1/load_lora_adapter``;
requests then name that adapter as their model, and adapters beyond `KEEP_ADAPTERS` are unloaded
(``/v1/unload_lora_adapter``) and their folders deleted. ``sync: checkpoint`` saves the whole
model to a folder and posts its path to `CHECKPOINT_ENDPOINT` (SGLang's). Every sample records
the version it was served by (``extras["policy_version"]``), which is the agent's `version`.

A request that fails after the client's retries becomes an invalid action carrying the reason;
401/403 stop the run (`ChatAuthError`). The API key comes from the environment variable the
server config names (``api_key_env``) and is scrubbed from every error.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import torch

from devicerl.actions import Action
from devicerl.agents.base import ActionSample
from devicerl.agents.vlm.config import VLMServerConfig
from devicerl.agents.vlm.load import write_adapter
from devicerl.clients.chat import ChatAuthError, ChatClient, ChatError, image_part
from devicerl.codecs import ImageGeometry, openai_messages
from devicerl.errors import ConfigError
from devicerl.records import Observation
from devicerl.secrets import scrub

log = logging.getLogger(__name__)
_TOKEN_ID = re.compile(r"^token_id:(\d+)$")

#: Served adapters are named ``<prefix>-<id>-v<version>`` (id: 6 hex digits per agent copy, so
#: copies sharing a server never load over each other's adapters).
ADAPTER_PREFIX = "devicerl"
#: Adapters kept loaded on the server: the newest and the one before it, which requests still
#: in flight when a new version arrives may name; older ones are unloaded.
KEEP_ADAPTERS = 2
#: Path (from the server root) that reloads full weights from a folder, body
#: ``{"model_path": folder}``: SGLang's.
CHECKPOINT_ENDPOINT = "/update_weights_from_disk"
#: Ask for token ids with the log-probs (vLLM's ``return_tokens_as_token_ids``), so samples
#: whose tokens are not their text's canonical spelling are marked.
TOKEN_IDS = True


class ServedPolicy:
    """Acting and weight sync through a server for one `VLMAgent` (see the module doc).

    ``agent`` is typed loosely: `devicerl.agents.vlm.agent` builds this class, so naming its
    type here would make the two modules import each other."""

    def __init__(self, agent: Any, config: VLMServerConfig) -> None:
        config.validate()
        self.agent = agent
        self.config = config
        self.client = ChatClient(config.chat)
        import httpx

        self._http = httpx.Client(timeout=self.client.config.timeout_s)
        self._own_dir = config.weights_dir is None
        root = config.weights_dir or tempfile.mkdtemp(prefix="devicerl-weights-")
        self.weights_dir = Path(root)
        self.served = config.model  # the model name requests use
        #: Adapter names of this copy: a learner's actor and a collector's copy may share a
        #: server, each with its own adapters.
        self.prefix = f"{ADAPTER_PREFIX}-{uuid.uuid4().hex[:6]}"
        self.served_version: int | None = None
        self.loaded: deque[tuple[str, Path]] = deque()
        self._lock = threading.Lock()

    # -- acting ---------------------------------------------------------------------------------
    def view(self, obs: Observation) -> tuple[Any, ImageGeometry]:
        """The screenshot as the agent resizes it (or None) and the geometry of the image the
        served model's processor makes of it."""
        image = self.agent.image(obs)
        return image, self.agent.geometry(obs, image)

    def messages(
        self, obs: Observation, view: tuple[Any, ImageGeometry] | None = None
    ) -> list[dict[str, Any]]:
        """The OpenAI chat for one observation: the local chat with the image as a PNG."""
        image, geometry = view or self.view(obs)
        chat = self.agent.messages(obs, image is not None, geometry)
        part = image_part(np.asarray(image), "png") if image is not None else None
        return openai_messages(chat, part)

    def _params(self, greedy: bool) -> dict[str, Any]:
        agent = self.agent
        params: dict[str, Any] = {
            "model": self.served,
            "temperature": 0.0 if greedy else agent.temperature,
            "top_p": 1.0,
            "max_tokens": agent.config.max_new_tokens,
            "logprobs": True,
        }
        if not greedy:
            params["seed"] = int(torch.randint(2**31, (1,), generator=agent.generator))
        if TOKEN_IDS:
            params["return_tokens_as_token_ids"] = True
        return params

    def _one(self, obs: Observation, params: dict[str, Any], version: int) -> ActionSample:
        t0 = time.perf_counter()
        view = self.view(obs)
        try:
            reply = self.client.complete(self.messages(obs, view), **params)
            choice = reply.raw["choices"][0]
            entries = (choice.get("logprobs") or {}).get("content") or []
            log_prob = float(sum(float(e["logprob"]) for e in entries)) if entries else None
        except ChatAuthError:
            raise  # every later request would fail too: stop the run
        except (ChatError, KeyError, IndexError, TypeError, ValueError) as e:
            reason = f"server request failed: {scrub(str(e))}"
            extras = {"error": reason, "policy_version": version}
            return ActionSample(Action.invalid("", reason), None, None, extras)
        text = reply.text
        extras: dict[str, Any] = {
            "policy_version": version,
            "served_model": params["model"],
            "tokens": len(entries),
            "latency_s": time.perf_counter() - t0,
        }
        ids = [_token_id(e.get("token", "")) for e in entries] if TOKEN_IDS else []
        if ids and None not in ids:
            extras["token_ids"] = ids
        if choice.get("finish_reason") == "length":
            extras["rescored"] = "cut at max_new_tokens (server log-prob kept)"
        elif "token_ids" in extras and ids != self.agent.target_ids(text):
            extras["rescored"] = "retokenized (server log-prob kept)"
        action = self.agent.codec.parse(text, view[1])
        return ActionSample(action, text, log_prob, extras)

    def act(self, observations: Sequence[Observation], greedy: bool) -> list[ActionSample]:
        """One request per observation (in parallel up to the chat client's concurrency)."""
        self._initial_push()
        agent = self.agent
        if agent.loaded and self.config.sync != "none" and self.served_version != agent.version:
            # a copy that trains (a learner's actor, evaluated): serve its current weights
            self.push(agent.get_weights(), agent.version)
        with self._lock:  # one seed per request: the batch's samples are independent
            params = [self._params(greedy) for _ in observations]
            version = self.agent.version
        if len(observations) <= 1:
            return [self._one(o, p, version) for o, p in zip(observations, params)]
        workers = min(len(observations), self.client.config.max_concurrency)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vlm-served") as pool:
            futures = [pool.submit(self._one, o, p, version) for o, p in zip(observations, params)]
            return [f.result() for f in futures]

    # -- weight sync ----------------------------------------------------------------------------
    def _initial_push(self) -> None:
        """A saved agent's adapters reach the server before its first request (a fresh LoRA
        starts as the base model, which the server already serves)."""
        saved = self.agent.saved_adapter
        if self.served_version is None and self.config.sync == "lora" and saved is not None:
            name = f"{self.prefix}-v{self.agent.version}"
            self._load_adapter(name, Path(saved), owned=False)
            self.served, self.served_version = name, self.agent.version

    def push(self, weights: Mapping[str, torch.Tensor], version: int) -> bool:
        """Make the server serve ``weights`` as policy ``version``. When the server refuses
        them (after the request failed), the agent keeps the version the server still serves,
        so every step records the version that produced it; the next version tries again."""
        if self.config.sync == "none":
            return True
        try:
            self._push(weights, version)
        except ChatAuthError:
            raise
        except ChatError as e:
            log.warning("%s; acting goes on with version %s", e, self.served_version or 0)
            self.agent.version = self.served_version or 0
            return False
        return True

    def _push(self, weights: Mapping[str, torch.Tensor], version: int) -> None:
        cfg = self.config
        with self._lock:
            if cfg.sync == "lora":
                if self.agent.config.lora is None:
                    raise ConfigError("vlm.server.sync=lora needs vlm.lora (adapters to push)")
                name = f"{self.prefix}-v{version}"
                folder = self.weights_dir / name
                shutil.rmtree(folder, ignore_errors=True)
                write_adapter(weights, self.agent.config.lora, self.agent.base_dir, folder)
                self._load_adapter(name, folder, owned=True)
                self.served = name
            else:
                folder = self.weights_dir / f"checkpoint-v{version}"
                shutil.rmtree(folder, ignore_errors=True)
                self.agent.model.save_pretrained(str(folder))  # set_weights loaded them
                self.agent.processor.save_pretrained(str(folder))
                self._post(CHECKPOINT_ENDPOINT, {"model_path": str(folder.resolve())})
                for old in self.weights_dir.glob("checkpoint-v*"):
                    if old != folder:
                        shutil.rmtree(old, ignore_errors=True)
            self.served_version = version

    def _load_adapter(self, name: str, folder: Path, owned: bool) -> None:
        self._post("load_lora_adapter", {"lora_name": name, "lora_path": str(folder.resolve())})
        self.loaded.append((name, folder if owned else Path()))
        while len(self.loaded) > KEEP_ADAPTERS:
            old, path = self.loaded.popleft()
            try:
                self._post("unload_lora_adapter", {"lora_name": old})
            finally:
                if path != Path():
                    shutil.rmtree(path, ignore_errors=True)

    def url(self, endpoint: str) -> str:
        """``endpoint`` under the base URL (``/v1/...``), or from the server root when it
        starts with ``/``."""
        base = self.config.base_url.rstrip("/")
        if endpoint.startswith("/"):
            parts = urlsplit(base)
            return f"{parts.scheme}://{parts.netloc}{endpoint}"
        return f"{base}/{endpoint}"

    def _post(self, endpoint: str, body: dict[str, Any]) -> None:
        url = self.url(endpoint)
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.config.api_key_env, "")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        try:
            resp = self._http.post(url, json=body, headers=headers)
        except Exception as e:
            raise ChatError(f"weight sync: POST {url} failed: {type(e).__name__}: {e}") from None
        if resp.status_code in (401, 403):
            raise ChatAuthError(f"weight sync: {url} refused our credentials", resp.status_code)
        if resp.status_code != 200:
            raise ChatError(
                f"weight sync: POST {url} answered {resp.status_code}: {resp.text[:200]}",
                resp.status_code,
            )

    def close(self) -> None:
        self.client.close()
        self._http.close()
        if self._own_dir:
            shutil.rmtree(self.weights_dir, ignore_errors=True)


def _token_id(token: str) -> int | None:
    m = _TOKEN_ID.match(token)
    return int(m.group(1)) if m else None
