# ruff: noqa: RUF009  (`_opt` builds a `dataclasses.field`, no shared mutable default)
"""The vision-language agent's configuration, apart from its torch code.

Config loading and ``devicerl train --help`` need these classes but not transformers, so they
live here (torch-free), as `devicerl.agents.config` does for the other agents.

The options are what a run's setup chooses. The rest is fixed in code (the element limit and
coordinate decimals in `devicerl.agents.vlm_prompt`, adapter naming and endpoints in
`devicerl.agents.vlm_remote`) or is a keyword of `VLMAgent.from_pretrained` for code that needs
it (the instructions, the attention kernel, the seed, which a run takes from ``agent.seed``).
`config_from_saved` reads the config an agent saved, including one saved with options that no
longer exist.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from devicerl.clients.chat import ChatConfig
from devicerl.errors import ConfigError

log = logging.getLogger(__name__)


def _opt(default: Any, help: str, **bounds: float) -> Any:
    return field(default=default, metadata={"help": help, **bounds})


#: Attention and MLP projections of the decoder-only language models VLMs use (Qwen, Llama,
#: Gemma, SmolLM); vision towers are left out whatever their projections are called.
DEFAULT_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass
class VLMLoRA:
    """LoRA adapters (peft, no dropout) on the language model's projections; the vision tower
    keeps none."""

    r: int = _opt(16, "adapter rank", min=1)
    alpha: int = _opt(32, "adapter scale (alpha / r multiplies the update)", min=1)
    target_modules: tuple[str, ...] = _opt(
        DEFAULT_LORA_TARGETS,
        "last names of the linear layers adapted (e.g. q_proj, gate_proj); layers inside the "
        "vision tower are never adapted unless train_vision is on",
    )

    def __post_init__(self) -> None:
        self.target_modules = tuple(self.target_modules)
        if not self.target_modules:
            raise ConfigError("vlm.lora.target_modules: name at least one layer")


@dataclass
class VLMServerConfig:
    """Act through an OpenAI-compatible inference server (vLLM, SGLang) instead of locally.

    ``chat.model`` is the served base model's name; each request carries the agent's own
    temperature and ``max_new_tokens``. After each new policy version the agent writes the new
    weights where the server can read them (``weights_dir``) and tells the server to load them:
    with ``sync: lora`` the LoRA adapter, through vLLM's ``/v1/load_lora_adapter``; with
    ``sync: checkpoint`` the whole model, through SGLang's ``/update_weights_from_disk``;
    ``none`` pushes nothing (`devicerl.agents.vlm_remote`).
    """

    chat: ChatConfig = field(default_factory=ChatConfig)
    sync: Literal["lora", "checkpoint", "none"] = _opt(
        "lora", "how new weights reach the server: lora, checkpoint or none"
    )
    weights_dir: str | None = _opt(
        None, "folder the server can read, where adapters and checkpoints are written (null: a "
        "temporary folder; use a shared one when the server runs on another machine)"
    )  # fmt: skip

    def validate(self) -> None:
        self.chat.validate()
        if not self.chat.model:
            raise ConfigError("vlm.server.chat.model: name the served base model")
        if self.sync not in ("lora", "checkpoint", "none"):
            raise ConfigError(f"vlm.server.sync: {self.sync!r} is not lora, checkpoint or none")


@dataclass
class VLMConfig:
    """A Hugging Face image-text-to-text policy: prompt, decoding, training and serving."""

    output_format: Literal["json", "autoui"] = _opt(
        "json",
        'the action text the model writes: json ({"type": ...}, points as [x, y]) or autoui '
        "(AutoUI's 'Action Plan: ... ; Action Decision: ...', points as [y, x])",
    )
    history: int = _opt(4, "previous actions in the prompt", min=0)
    include_elements: bool = _opt(
        False, "list the UI elements in the prompt (a phone's screen gives pixels only)"
    )
    image_size: tuple[int, int] | None = _opt(
        None, "(width, height) the screenshot is resized to before the processor (null: as is)"
    )
    max_new_tokens: int = _opt(64, "longest generated action text, in tokens", min=1)
    temperature: float = _opt(1.0, "sampling temperature (greedy decoding ignores it)", gt=0)
    lora: VLMLoRA | None = _opt(None, "LoRA adapters; null trains the whole language model")
    train_vision: bool = _opt(False, "train (or adapt) the vision tower too; off: it stays frozen")
    gradient_checkpointing: bool = _opt(
        False, "recompute activations in the backward pass (less memory, more time)"
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16", "float64"] = _opt(
        "auto", "weights' dtype; auto: bfloat16 on a GPU, float32 on a CPU"
    )
    server: VLMServerConfig | None = _opt(
        None, "act through an OpenAI-compatible server (null: generate locally)"
    )

    def __post_init__(self) -> None:
        if isinstance(self.lora, dict):
            self.lora = VLMLoRA(**self.lora)
        if isinstance(self.server, dict):
            server = dict(self.server)
            if isinstance(server.get("chat"), dict):
                server["chat"] = ChatConfig(**server["chat"])
            self.server = VLMServerConfig(**server)
        if self.image_size is not None:
            self.image_size = (int(self.image_size[0]), int(self.image_size[1]))
            if min(self.image_size) < 1:
                raise ConfigError(f"vlm.image_size {self.image_size}: sides must be >= 1")
        if self.temperature <= 0:
            raise ConfigError("vlm.temperature must be > 0 (use greedy=True for arg-max decoding)")
        if self.output_format not in ("json", "autoui"):
            raise ConfigError(f"vlm.output_format: {self.output_format!r} is not json or autoui")

    def validate(self) -> None:
        if self.server is not None:
            self.server.validate()


#: Options older agents saved that are now fixed in code or chosen at load time, with the value
#: the code now uses (None: a load-time choice, any saved value is fine to drop).
RETIRED = {
    "max_elements": 30,
    "precision": 3,
    "system_role": None,
    "attn_implementation": None,
    "seed": None,
    "system_prompt": None,
}
RETIRED_LORA = {"dropout": None}
RETIRED_SERVER = {
    "adapter_prefix": None,
    "keep_adapters": None,
    "checkpoint_endpoint": None,
    "token_ids": None,
}


def _known(cls: type, data: dict[str, Any], retired: dict[str, Any], where: str) -> dict[str, Any]:
    """``data`` without the retired keys; a retired option saved with another value than the
    code now uses is logged (the agent then runs with the code's value)."""
    out = dict(data)
    for key, now in retired.items():
        if key in out:
            old = out.pop(key)
            if now is not None and old != now:
                log.warning("%s%s=%r saved by an older version is not an option any more; "
                            "%r is used", where, key, old, now)  # fmt: skip
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(out) - names)
    if unknown:
        raise ConfigError(f"{where}{unknown[0]}: not an option of {cls.__name__}")
    return out


def lora_from_saved(data: dict[str, Any]) -> VLMLoRA:
    """The LoRA settings an agent saved (``dataclasses.asdict``), older layouts included."""
    return VLMLoRA(**_known(VLMLoRA, data, RETIRED_LORA, "vlm.lora."))


def config_from_saved(data: dict[str, Any]) -> VLMConfig:
    """The config an agent saved (``dataclasses.asdict`` of a `VLMConfig`), including one
    written when more options existed: those are dropped (see `RETIRED`); a key no version had
    is a `ConfigError` naming it."""
    if not isinstance(data, dict):
        raise ConfigError(f"the saved config is a {type(data).__name__}, not a mapping")
    out = _known(VLMConfig, data, RETIRED, "vlm.")
    if isinstance(out.get("lora"), dict):
        out["lora"] = lora_from_saved(out["lora"])
    server = out.get("server")
    if isinstance(server, dict):
        server = _known(VLMServerConfig, server, RETIRED_SERVER, "vlm.server.")
        chat = server.get("chat")
        if isinstance(chat, dict):  # chat options come and go with the chat client's
            fields = {f.name for f in dataclasses.fields(ChatConfig)}
            server["chat"] = ChatConfig(**{k: v for k, v in chat.items() if k in fields})
        out["server"] = VLMServerConfig(**server)
    return VLMConfig(**out)
