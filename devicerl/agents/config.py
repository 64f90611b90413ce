# ruff: noqa: RUF009  (`_opt` builds a `dataclasses.field`, no shared mutable default)
"""The agents' configuration dataclasses, apart from their torch code.

`devicerl train --help` (and every config load) needs these classes but not the models, so they
live here, where importing them costs no torch. `devicerl.agents.autoui`, `small_net` and
`featurize` re-export them under their old names.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from devicerl.actions import ActionType
from devicerl.errors import ConfigError

INSTR_FEATURES = 7
ELEM_FEATURES = 20
#: Extra columns (appended) with ``history`` on: per token, per element, and global ones.
INSTR_HISTORY, ELEM_HISTORY = 2, 2


def _opt(default: Any, help: str, **bounds: float) -> Any:
    """A field with its ``--help`` text and bounds (checked by `devicerl.config` at load)."""
    return field(default=default, metadata={"help": help, **bounds})


@dataclass
class FeatureConfig:
    """Sizes of the featurisation (saved with the model: changing them changes the model)."""

    buckets: int = _opt(8192, "hash buckets of the word-piece vocabulary", min=1)
    pieces_per_word: int = _opt(6, "word pieces hashed per word", min=1)
    max_instr_tokens: int = _opt(48, "instruction tokens kept", min=1)
    max_elements: int = _opt(64, "UI elements kept per screen", min=1)
    max_elem_ids: int = _opt(48, "distinct element ids embedded", min=1)
    screenshot_size: tuple[int, int] | None = _opt(
        None, "(width, height) of the downscaled screenshot fed to the model; null: no pixels"
    )
    overlap_features: bool = _opt(
        True, "explicit instruction/element overlap features (off only for ablations)"
    )
    history: bool = _opt(True, "features of the episode's earlier actions")
    role_mention: bool = _opt(
        True, "per element: whether the instruction names its kind (text, button, link)"
    )

    @property
    def instr_features(self) -> int:
        return INSTR_FEATURES + (INSTR_HISTORY if self.history else 0)

    @property
    def elem_features(self) -> int:
        return ELEM_FEATURES + int(self.role_mention) + (ELEM_HISTORY if self.history else 0)

    def __post_init__(self) -> None:
        if self.screenshot_size is not None:
            self.screenshot_size = (int(self.screenshot_size[0]), int(self.screenshot_size[1]))


@dataclass
class LoRASettings:
    """LoRA adapters (peft) on T5's attention (and optionally feed-forward) projections."""

    r: int = _opt(8, "adapter rank", min=1)
    alpha: int = _opt(16, "adapter scale (alpha / r multiplies the update)", min=1)
    dropout: float = _opt(0.0, "dropout on the adapter input", min=0, lt=1)
    target_modules: tuple[str, ...] = _opt(("q", "k", "v", "o"), "T5 projections adapted")


@dataclass
class AutoUIConfig:
    """The Auto-UI agent's decoding and input (null: the saved agent's own settings)."""

    max_input_tokens: int = _opt(512, "longest input text, in T5 tokens", min=1)
    max_new_tokens: int = _opt(128, "longest generated action text, in tokens", min=1)
    precision: int = _opt(
        4, "decimals of coordinates in the action text and in previous actions", min=0
    )
    history: int = _opt(4, "previous actions in the input text", min=0)
    temperature: float = _opt(1.0, "sampling temperature (greedy decoding ignores it)", gt=0)
    vision_features: Literal["pooled", "patch"] = _opt(
        "pooled", "image features fused with the text: one pooled vector or every patch"
    )
    fusion_heads: int = _opt(1, "attention heads of the image fusion", min=1)
    lora: LoRASettings | None = _opt(None, "LoRA adapters; null trains the whole model")
    seed: int = _opt(0, "seed of sampling and of new fusion weights", min=0)

    def __post_init__(self) -> None:
        if isinstance(self.lora, dict):
            lora = dict(self.lora)
            lora["target_modules"] = tuple(lora.get("target_modules", ("q", "k", "v", "o")))
            self.lora = LoRASettings(**lora)
        if self.temperature <= 0:
            raise ConfigError("temperature must be > 0 (use greedy=True for arg-max decoding)")


@dataclass
class SmallAgentConfig:
    """Architecture and behaviour of the small agent (saved as JSON next to the weights)."""

    d_model: int = _opt(128, "transformer width (a multiple of n_heads)", min=1)
    n_layers: int = _opt(2, "transformer layers", min=1)
    n_heads: int = _opt(4, "attention heads", min=1)
    d_ff: int = _opt(256, "feed-forward width", min=1)
    dropout: float = _opt(0.0, "dropout rate", min=0, lt=1)
    max_span: int = _opt(12, "longest typed span, in instruction tokens", min=1)
    swipes: bool = _opt(True, "allow swipes (up, down, left, right from the screen centre)")
    allowed_types: tuple[str, ...] | None = _opt(
        None,
        "action types the agent may choose (ActionType names, e.g. [DUAL_POINT, TYPE]); null: all",
    )
    temperature: float = _opt(1.0, "sampling temperature", gt=0)
    quote_prior: float = _opt(
        3.0,
        "initial weight of the prior for typing a quoted phrase of the instruction (0: none)",
    )
    explore: float = _opt(
        0.05,
        "fraction of a uniform choice mixed into the action-type and element choices, in "
        "sampling and log-probs alike; keeps a policy that never succeeds from collapsing "
        "(0: off)",
        min=0,
        lt=1,
    )
    seed: int = _opt(0, "seed of the initial weights", min=0)
    features: FeatureConfig = field(default_factory=FeatureConfig)

    def __post_init__(self) -> None:
        if isinstance(self.features, dict):
            self.features = FeatureConfig(**self.features)
        if self.allowed_types is not None:
            self.allowed_types = tuple(ActionType(t).value for t in self.allowed_types)
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} must be divisible by n_heads {self.n_heads}")
        if self.temperature <= 0:
            raise ValueError("temperature must be > 0 (use greedy=True for argmax actions)")
        if not 0.0 <= self.explore < 1.0:
            raise ValueError(f"explore must be in [0, 1), got {self.explore}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
