# ruff: noqa: RUF009  (`_opt` builds a `dataclasses.field`, no shared mutable default)
"""The vision-language agent's configuration, apart from its torch code.

Config loading and ``devicerl train --help`` need these classes but not transformers, so they
live here (torch-free), as `devicerl.agents.config` does for the other agents.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from devicerl.clients.chat import ChatConfig
from devicerl.errors import ConfigError


def _opt(default: Any, help: str, **bounds: float) -> Any:
    return field(default=default, metadata={"help": help, **bounds})


#: Attention and MLP projections of the decoder-only language models VLMs use (Qwen, Llama,
#: Gemma, SmolLM); vision towers are left out whatever their projections are called.
DEFAULT_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass
class VLMLoRA:
    """LoRA adapters (peft) on the language model's projections; the vision tower keeps none."""

    r: int = _opt(16, "adapter rank", min=1)
    alpha: int = _opt(32, "adapter scale (alpha / r multiplies the update)", min=1)
    dropout: float = _opt(0.0, "dropout on the adapter input", min=0, lt=1)
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

    ``chat.model`` is the served base model's name. After each new policy version the agent
    writes the new weights where the server can read them (``weights_dir``) and tells the
    server to load them: with ``sync: lora`` the LoRA adapter, through vLLM's
    ``/v1/load_lora_adapter`` (served as ``<adapter_prefix>-<id>-v<version>``, older adapters
    unloaded); with ``sync: checkpoint`` the whole model, through ``checkpoint_endpoint``
    (SGLang's ``/update_weights_from_disk`` by default); ``none`` pushes nothing.
    """

    chat: ChatConfig = field(default_factory=lambda: ChatConfig(max_tokens=64))
    sync: Literal["lora", "checkpoint", "none"] = _opt(
        "lora", "how new weights reach the server: lora, checkpoint or none"
    )
    weights_dir: str | None = _opt(
        None, "folder the server can read, where adapters and checkpoints are written (null: a "
        "temporary folder; use a shared one when the server runs on another machine)"
    )  # fmt: skip
    adapter_prefix: str = _opt(
        "devicerl",
        "served adapters are named <prefix>-<id>-v<version> (id: 6 hex digits per agent copy, so "
        "copies sharing a server never load over each other's adapters)",
    )
    keep_adapters: int = _opt(2, "adapters kept loaded on the server (older ones unloaded)", min=1)
    checkpoint_endpoint: str = _opt(
        "/update_weights_from_disk",
        "path (from the server root) that reloads full weights from a folder: body "
        '{"model_path": folder}',
    )
    token_ids: bool = _opt(
        True,
        "ask for token ids with the log-probs (vLLM's return_tokens_as_token_ids), so samples "
        "whose tokens are not the text's canonical spelling are marked",
    )

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
    max_elements: int = _opt(30, "longest element list", min=0)
    precision: int = _opt(3, "decimals of coordinates in prompts and action texts", min=0)
    image_size: tuple[int, int] | None = _opt(
        None, "(width, height) the screenshot is resized to before the processor (null: as is)"
    )
    system_prompt: str | None = _opt(
        None, "instructions replacing the generated ones (the action space and its format)"
    )
    system_role: bool = _opt(
        True, "send the instructions as a system message (off: at the top of the user message, "
        "for chat templates without a system role)"
    )  # fmt: skip
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
    attn_implementation: str | None = _opt(
        None, "transformers attention kernel (sdpa, eager, flash_attention_2); null: its default"
    )
    seed: int = _opt(0, "seed of sampling and of new adapters", min=0)
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
