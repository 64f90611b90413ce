"""A loopback inference server that speaks vLLM's OpenAI-compatible endpoints with a real model.

For tests and dry runs of `VLMAgent` in server mode: ``VLMTestServer(model_dir)`` loads a local
transformers image-text-to-text model (e.g. one from `build_tiny_vlm`) and answers, over real
sockets:

- ``POST /v1/chat/completions``: OpenAI messages (text parts and ``image_url`` data URLs)
  through the model's chat template; sampled at the request's ``temperature`` (0: greedy), up to
  ``max_tokens``, seeded by ``seed``; with ``logprobs`` the chosen tokens' log-probs at that
  temperature, end-of-sequence included (vLLM's ``--logprobs-mode processed_logprobs``; greedy
  requests get them at temperature 1), tokens spelled ``token_id:<id>`` with
  ``return_tokens_as_token_ids``. ``model`` is the base model's name or a loaded adapter's.
- ``POST /v1/load_lora_adapter`` / ``POST /v1/unload_lora_adapter`` (``lora_name``,
  ``lora_path``): peft loads the adapter folder into the model, as vLLM loads it.
- ``POST /update_weights_from_disk`` (``model_path``): SGLang's full-weight reload.
- ``GET /v1/models``.

Every request is recorded (path, headers, body); with ``api_key`` a request without
``Authorization: Bearer <key>`` gets 401. Adapter and checkpoint paths must lie under
``allowed_root`` when it is given. Requests run one at a time on the model.
"""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from devicerl.agents.vlm.agent import VLMAgent
from devicerl.agents.vlm.config import VLMConfig


@dataclass
class Recorded:
    at: float
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class VLMTestServer:
    """``with VLMTestServer(model_dir, name="base") as srv: ... srv.base_url ...``"""

    def __init__(
        self,
        model_dir: str | Path,
        name: str = "base",
        api_key: str | None = None,
        allowed_root: str | Path | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.name = name
        self.api_key = api_key
        self.allowed_root = Path(allowed_root).resolve() if allowed_root else None
        self.agent = VLMAgent.from_pretrained(model_dir, VLMConfig(history=0))
        self.adapters: list[str] = []
        self.requests: list[Recorded] = []
        self.generated = 0
        self._model_lock = threading.Lock()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server._handle(self, "GET", {})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"_unparseable": raw.decode("utf-8", "replace")}
                server._handle(self, "POST", body)

        self._httpd = ThreadingHTTPServer((host, 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    # -- dispatch -------------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler, method: str, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(Recorded(time.time(), method, h.path, dict(h.headers), body))
        routes = {
            ("POST", "/v1/chat/completions"): self._complete,
            ("POST", "/v1/load_lora_adapter"): self._load,
            ("POST", "/v1/unload_lora_adapter"): self._unload,
            ("POST", "/update_weights_from_disk"): self._reload,
            ("GET", "/v1/models"): self._models,
        }
        try:
            if self.api_key and h.headers.get("Authorization") != f"Bearer {self.api_key}":
                raise _Refused(401, "invalid API key")
            route = routes.get((method, h.path.rstrip("/")))
            if route is None:
                raise _Refused(404, f"no route {method} {h.path}")
            with self._model_lock:
                status, payload = 200, route(body)
        except _Refused as e:
            status, payload = e.status, {"error": {"message": str(e), "code": e.status}}
        except Exception as e:  # a bad request must not kill the server thread
            status, payload = 400, {"error": {"message": f"{type(e).__name__}: {e}"}}
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        try:
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _path(self, value: Any) -> Path:
        if not isinstance(value, str) or not value:
            raise _Refused(400, "a folder path is required")
        path = Path(value).resolve()
        if self.allowed_root is not None and not path.is_relative_to(self.allowed_root):
            raise _Refused(400, f"{path} is outside the allowed folder")
        if not path.is_dir():
            raise _Refused(400, f"{path} is not a folder")
        return path

    # -- endpoints ------------------------------------------------------------------------------
    def _models(self, body: dict[str, Any]) -> dict[str, Any]:
        names = [self.name, *self.adapters]
        return {"object": "list", "data": [{"id": n, "object": "model"} for n in names]}

    def _load(self, body: dict[str, Any]) -> bytes:
        from peft import PeftModel

        name, path = str(body.get("lora_name", "")), self._path(body.get("lora_path"))
        if not name or name == self.name or name in self.adapters:
            raise _Refused(400, f"adapter name {name!r} is empty or already loaded")
        module = self.agent.module
        if isinstance(module, PeftModel):
            module.load_adapter(str(path), adapter_name=name)
        else:
            self.agent._module = PeftModel.from_pretrained(module, str(path), adapter_name=name)
        self.agent.module.eval()
        self.adapters.append(name)
        return f"Success: LoRA adapter '{name}' added successfully.".encode()

    def _unload(self, body: dict[str, Any]) -> bytes:
        name = str(body.get("lora_name", ""))
        if name not in self.adapters:
            raise _Refused(404, f"adapter {name!r} is not loaded")
        self.agent.module.delete_adapter(name)
        self.adapters.remove(name)
        return f"Success: LoRA adapter '{name}' removed successfully.".encode()

    def _reload(self, body: dict[str, Any]) -> dict[str, Any]:
        from transformers import AutoModelForImageTextToText

        path = self._path(body.get("model_path"))
        if not (path / "config.json").exists():
            raise _Refused(400, f"{path} holds no model (config.json)")
        fresh = AutoModelForImageTextToText.from_pretrained(str(path), dtype=self.agent.dtype)
        missing, unexpected = self.agent.model.load_state_dict(fresh.state_dict(), strict=False)
        if missing or unexpected:
            raise _Refused(400, f"weights do not fit the model: {(missing + unexpected)[:3]}")
        return {"success": True, "message": f"loaded {path.name}"}

    def _complete(self, body: dict[str, Any]) -> dict[str, Any]:
        model = body.get("model")
        if model != self.name and model not in self.adapters:
            raise _Refused(404, f"The model `{model}` does not exist.")
        chat, image = self._chat(body.get("messages"))
        agent = self.agent
        temperature = float(body.get("temperature", 1.0))
        greedy = temperature <= 0
        if body.get("seed") is not None:
            agent.generator.manual_seed(int(body["seed"]))
        from peft import PeftModel

        module = agent.module
        if isinstance(module, PeftModel):
            if model == self.name:
                with module.disable_adapter():
                    ids, lps = self._generate(chat, image, greedy, temperature, body)
            else:
                module.set_adapter(model)
                ids, lps = self._generate(chat, image, greedy, temperature, body)
        else:
            ids, lps = self._generate(chat, image, greedy, temperature, body)
        self.generated += 1
        ended = bool(ids) and ids[-1] in agent.eos_ids
        as_ids = bool(body.get("return_tokens_as_token_ids"))
        content = [
            {
                "token": f"token_id:{t}" if as_ids else agent.tokenizer.decode([t]),
                "logprob": max(lp, -9999.0),
                "top_logprobs": [],
            }
            for t, lp in zip(ids, lps)
        ]
        return {
            "id": f"chatcmpl-{self.generated}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": agent.decode(ids)},
                    "logprobs": {"content": content} if body.get("logprobs") else None,
                    "finish_reason": "stop" if ended else "length",
                }
            ],
            "usage": {"completion_tokens": len(ids)},
        }

    def _generate(self, chat, image, greedy: bool, temperature: float, body: dict[str, Any]):
        inputs = self.agent.encode_chats([chat], [image])
        t = 1.0 if greedy else temperature
        max_tokens = int(body.get("max_tokens") or 16)
        ids, lps = self.agent.generate_ids(inputs, greedy, t, max_new_tokens=max_tokens)
        return ids[0], lps[0]

    @staticmethod
    def _chat(messages: Any) -> tuple[list[dict[str, Any]], Any]:
        """OpenAI messages -> transformers chat (content parts) and the one image (or None)."""
        from PIL import Image

        if not isinstance(messages, list) or not messages:
            raise _Refused(400, "messages must be a non-empty list")
        chat, image = [], None
        for m in messages:
            content = m["content"]
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            parts = []
            for part in content:
                if part["type"] == "image_url":
                    url = part["image_url"]["url"]
                    data = base64.b64decode(url.split(",", 1)[1])
                    image = Image.open(io.BytesIO(data)).convert("RGB")
                    parts.append({"type": "image"})
                else:
                    parts.append({"type": "text", "text": part["text"]})
            chat.append({"role": m["role"], "content": parts})
        return chat, image

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> VLMTestServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> VLMTestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
