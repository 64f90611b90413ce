# ruff: noqa: RUF009  (`_opt` builds a `dataclasses.field`, no shared mutable default)
"""The vision-language agent's configuration, apart from its torch code.

Config loading and ``devicerl train --help`` need these classes but not transformers, so they
live here (torch-free), as `devicerl.agents.config` does for the other agents.

`VLMOptions` is what a run's setup chooses under ``agent.vlm``; `VLMConfig` is everything the
agent runs with and saves: those options plus the prompt and sampling settings every agent kind
shares, which a run sets as ``agent.history``, ``agent.include_elements`` and
``agent.temperature`` (`devicerl.agents.factory.AgentSpec`). The rest is fixed in code (the
frozen vision tower, the element limit in `devicerl.agents.vlm.prompt`, each codec's format,
adapter naming and endpoints in `devicerl.agents.vlm.remote`) or is
a keyword of `VLMAgent.from_pretrained` for code that needs it (the instructions, the attention
kernel, the seed, which a run takes from ``agent.seed``). `config_from_saved` reads the config an
agent saved, including one saved with options that no longer exist.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from devicerl.clients.chat import ChatConfig
from devicerl.codecs import CODECS, FAMILY_CODECS
from devicerl.errors import ConfigError

log = logging.getLogger(__name__)


def _opt(default: Any, help: str, **bounds: float) -> Any:
    return field(default=default, metadata={"help": help, **bounds})


#: Attention and MLP projections of the decoder-only language models VLMs use (Qwen, Llama,
#: Gemma, SmolLM); vision towers are left out whatever their projections are called.
DEFAULT_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")

#: The server's endpoint fields take `ChatConfig`'s defaults and help.
_CHAT = ChatConfig()
_CHAT_HELP = {f.name: f.metadata["help"] for f in dataclasses.fields(ChatConfig)}


@dataclass
class VLMLoRA:
    """LoRA adapters (peft, no dropout) on the language model's projections; the vision tower
    keeps none."""

    r: int = _opt(16, "adapter rank", min=1)
    alpha: int = _opt(32, "adapter scale (alpha / r multiplies the update)", min=1)
    target_modules: tuple[str, ...] = _opt(
        DEFAULT_LORA_TARGETS,
        "last names of the linear layers adapted (e.g. q_proj, gate_proj); layers inside the "
        "vision tower are never adapted",
    )

    def __post_init__(self) -> None:
        self.target_modules = tuple(self.target_modules)
        if not self.target_modules:
            raise ConfigError("vlm.lora.target_modules: name at least one layer")


@dataclass
class VLMServerConfig:
    """Act through an OpenAI-compatible inference server (vLLM, SGLang) instead of locally.

    ``model`` is the served base model's name; each request carries the agent's own
    temperature and ``max_new_tokens``, and the client's timeout, concurrency cap and rate limit
    are `ChatConfig`'s defaults (`chat`). After each new policy version the agent writes the new
    weights where the server can read them (``weights_dir``) and tells the server to load them:
    with ``sync: lora`` the LoRA adapter, through vLLM's ``/v1/load_lora_adapter``; with
    ``sync: checkpoint`` the whole model, through SGLang's ``/update_weights_from_disk``;
    ``none`` pushes nothing (`devicerl.agents.vlm.remote`).
    """

    base_url: str = _opt(_CHAT.base_url, _CHAT_HELP["base_url"])
    model: str = _opt(_CHAT.model, _CHAT_HELP["model"])
    api_key_env: str = _opt(_CHAT.api_key_env, _CHAT_HELP["api_key_env"])
    sync: Literal["lora", "checkpoint", "none"] = _opt(
        "lora", "how new weights reach the server: lora, checkpoint or none"
    )
    weights_dir: str | None = _opt(
        None, "folder the server can read, where adapters and checkpoints are written (null: a "
        "temporary folder; use a shared one when the server runs on another machine)"
    )  # fmt: skip

    @property
    def chat(self) -> ChatConfig:
        """The chat client's settings: this server's endpoint, the rest at their defaults."""
        return ChatConfig(base_url=self.base_url, model=self.model, api_key_env=self.api_key_env)

    def validate(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"vlm.server.base_url={self.base_url}: must start with http:// or https://"
            )
        if not self.model:
            raise ConfigError("vlm.server.model: name the served base model")
        if self.sync not in ("lora", "checkpoint", "none"):
            raise ConfigError(f"vlm.server.sync: {self.sync!r} is not lora, checkpoint or none")


@dataclass
class VLMOptions:
    """The VLM agent as a run configures it (``agent.vlm``): the action language, input size,
    decoding length, training and serving. They replace the saved agent's own (`VLMConfig`;
    a ``codec`` left null keeps the saved one); its prompt and sampling settings stay its own
    unless the run sets ``agent.history``, ``agent.include_elements`` or
    ``agent.temperature``."""

    codec: str | None = _opt(
        None,
        f"action language the model writes and reads ({', '.join(CODECS)}; null: a saved "
        "agent's own, else its family's: "
        + ", ".join(f"{c} for {f}" for f, c in FAMILY_CODECS.items())
        + ", json for the others)",
    )

    image_size: tuple[int, int] | None = _opt(
        None, "(width, height) the screenshot is resized to before the processor (null: as is)"
    )
    max_new_tokens: int = _opt(64, "longest generated action text, in tokens", min=1)
    lora: VLMLoRA | None = _opt(None, "LoRA adapters; null trains the whole language model")
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
        if self.codec is not None and self.codec not in CODECS:
            raise ConfigError(f"vlm.codec {self.codec!r}: expected one of {', '.join(CODECS)}")
        if isinstance(self.lora, dict):
            self.lora = VLMLoRA(**self.lora)
        if isinstance(self.server, dict):
            self.server = VLMServerConfig(**self.server)
        if self.image_size is not None:
            self.image_size = (int(self.image_size[0]), int(self.image_size[1]))
            if min(self.image_size) < 1:
                raise ConfigError(f"vlm.image_size {self.image_size}: sides must be >= 1")

    def validate(self) -> None:
        if self.server is not None:
            self.server.validate()

    def apply(self, config: VLMConfig) -> VLMConfig:
        """``config`` with these options in place of its own (a null ``codec`` keeps its
        own)."""
        fields = [f.name for f in dataclasses.fields(VLMOptions)]
        chosen = {name: getattr(self, name) for name in fields}
        if self.codec is None:
            del chosen["codec"]
        return dataclasses.replace(config, **chosen)


@dataclass
class VLMConfig(VLMOptions):
    """A Hugging Face image-text-to-text policy: the run's `VLMOptions` plus its prompt and
    sampling settings (what a saved agent carries). The model writes one action in its codec's
    language (``codec`` None: its family's, resolved when the agent is built) and its vision
    tower stays frozen."""

    history: int = _opt(4, "previous actions in the prompt", min=0)
    include_elements: bool = _opt(
        False, "list the UI elements in the prompt (a phone's screen gives pixels only)"
    )
    temperature: float = _opt(1.0, "sampling temperature (greedy decoding ignores it)", gt=0)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.temperature <= 0:
            raise ConfigError("vlm.temperature must be > 0 (use greedy=True for arg-max decoding)")


#: The codec of agents (and run configs) saved before the codec was an option: JSON actions.
SAVED_BEFORE_CODECS = "json"
#: Options older agents saved that are now fixed in code or chosen at load time, with the value
#: the code now uses (None: a load-time choice, any saved value is fine to drop).
RETIRED = {
    "output_format": "json",
    "train_vision": False,
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
#: Older agents saved the server's endpoint as a nested ``chat`` block (a whole `ChatConfig`);
#: these of its keys are the server's own fields now, the others are dropped.
SERVER_CHAT_KEYS = ("base_url", "model", "api_key_env")


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
    is a `ConfigError` naming it. An agent saved before codecs existed wrote JSON actions: its
    codec is ``json``."""
    if not isinstance(data, dict):
        raise ConfigError(f"the saved config is a {type(data).__name__}, not a mapping")
    out = _known(VLMConfig, data, RETIRED, "vlm.")
    out.setdefault("codec", SAVED_BEFORE_CODECS)
    if isinstance(out.get("lora"), dict):
        out["lora"] = lora_from_saved(out["lora"])
    server = out.get("server")
    if isinstance(server, dict):
        server = dict(server)
        chat = server.pop("chat", None)
        if isinstance(chat, dict):  # the older nested layout
            for key in SERVER_CHAT_KEYS:
                if key in chat:
                    server.setdefault(key, chat[key])
        elif chat is not None:
            raise ConfigError(f"vlm.server.chat: {type(chat).__name__}, not a mapping")
        server = _known(VLMServerConfig, server, RETIRED_SERVER, "vlm.server.")
        out["server"] = VLMServerConfig(**server)
    return VLMConfig(**out)
