# ruff: noqa: RUF009  (`_opt` builds a `dataclasses.field`, no shared mutable default)
"""The agents' configuration dataclasses, apart from their torch code.

`devicerl train --help` (and every config load) needs these classes but not the models, so they
live here, where importing them costs no torch. `devicerl.agents.autoui`, `small_net` and
`featurize` re-export them under their old names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from devicerl.actions import AITW_TYPES, ActionType
from devicerl.config import drop_retired
from devicerl.errors import ConfigError

INSTR_FEATURES = 7
ELEM_FEATURES = 20
#: Extra columns (appended) with ``history`` on: per token, per element, and global ones.
INSTR_HISTORY, ELEM_HISTORY = 2, 2
#: Extra columns (appended last) with ``field_labels`` on (`devicerl.agents.field_labels`).
INSTR_FIELD, ELEM_FIELD = 2, 2
#: The pixel CNN downsamples by this factor (the element pooling masks are on its output grid).
PIXEL_STRIDE = 4


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
    dom_flags: bool = _opt(
        True,
        "the DOM's clickable / focused / editable flags (a phone's screen gives none; off: "
        "those features are zero and never decide which elements are kept)",
    )
    pixels: bool = _opt(
        False, "per-element and per-grid-cell features of the screenshot from a small CNN"
    )
    pixel_size: tuple[int, int] = _opt(
        (96, 128), "(width, height) the CNN's screenshot is downscaled to (multiples of 4)"
    )
    elem_words: int = _opt(0, "words of each element's text kept for page-text spans", min=0)
    instr_positions: Literal["absolute", "relative", "shifted"] = _opt(
        "absolute",
        "how instruction tokens know their order. absolute: a learned embedding per token index "
        "and a relative-position feature (a pointer can learn 'the third token'); relative: "
        "neither, attention between tokens gets a learned bias per clipped offset and the "
        "typed-span end pointer one per span length, so the span pointers can only use what a "
        "token is and what is near it; shifted: the index embedding starts at an offset derived "
        "from the instruction's words (0 to max_instr_tokens - 1) and the position feature is "
        "off, so order within the instruction stays but 'the third token' is no fixed input",
    )

    field_labels: bool = _opt(
        False,
        "text fields are known by their label (placeholder, ARIA label, or the short text left "
        "of or above them), and instruction tokens are marked when they follow a mention of the "
        "label of the field being typed into (or of another field)",
    )

    @property
    def instr_features(self) -> int:
        return (
            INSTR_FEATURES
            + (INSTR_HISTORY if self.history else 0)
            + (INSTR_FIELD if self.field_labels else 0)
        )

    @property
    def elem_features(self) -> int:
        return (
            ELEM_FEATURES
            + int(self.role_mention)
            + (ELEM_HISTORY if self.history else 0)
            + (ELEM_FIELD if self.field_labels else 0)
        )

    def __post_init__(self) -> None:
        if self.screenshot_size is not None:
            self.screenshot_size = (int(self.screenshot_size[0]), int(self.screenshot_size[1]))
        self.pixel_size = (int(self.pixel_size[0]), int(self.pixel_size[1]))
        if self.instr_positions not in ("absolute", "relative", "shifted"):
            raise ValueError(
                f"instr_positions {self.instr_positions!r}: expected 'absolute', 'relative' "
                "or 'shifted'"
            )
        if min(self.pixel_size) < PIXEL_STRIDE or any(v % PIXEL_STRIDE for v in self.pixel_size):
            raise ValueError(f"pixel_size {self.pixel_size}: sides must be multiples of 4")


@dataclass
class LoRASettings:
    """LoRA adapters (peft) on T5's attention (and optionally feed-forward) projections."""

    r: int = _opt(8, "adapter rank", min=1)
    alpha: int = _opt(16, "adapter scale (alpha / r multiplies the update)", min=1)
    target_modules: tuple[str, ...] = _opt(("q", "k", "v", "o"), "T5 projections adapted")


#: Auto-UI's longest input text (T5 tokens), the decimals of coordinates in its action texts and
#: the attention heads of its image fusion (as the released checkpoint).
AUTOUI_MAX_INPUT_TOKENS, AUTOUI_PRECISION, AUTOUI_FUSION_HEADS = 512, 4, 1


@dataclass
class AutoUIConfig:
    """The Auto-UI agent's decoding, input and adapters: what a saved Auto-UI agent carries
    (a bare checkpoint gets these defaults). A run chooses the adapters (`AutoUIOptions`) and
    may set ``history`` and ``temperature`` (``agent.history``, ``agent.temperature``)."""

    max_new_tokens: int = _opt(128, "longest generated action text, in tokens", min=1)
    history: int = _opt(4, "previous actions in the input text", min=0)
    temperature: float = _opt(1.0, "sampling temperature (greedy decoding ignores it)", gt=0)
    vision_features: Literal["pooled", "patch"] = _opt(
        "pooled", "image features fused with the text: one pooled vector or every patch"
    )
    lora: LoRASettings | None = _opt(None, "LoRA adapters; null trains the whole model")

    def __post_init__(self) -> None:
        if isinstance(self.lora, dict):
            lora = {k: v for k, v in self.lora.items() if k != "dropout"}  # older saved agents
            lora["target_modules"] = tuple(lora.get("target_modules", ("q", "k", "v", "o")))
            self.lora = LoRASettings(**lora)
        if self.temperature <= 0:
            raise ConfigError("temperature must be > 0 (use greedy=True for arg-max decoding)")


@dataclass
class AutoUIOptions:
    """The Auto-UI agent as a run configures it (``agent.autoui``): its LoRA adapters, on top
    of the saved agent's `AutoUIConfig` (or the defaults for a bare checkpoint)."""

    lora: LoRASettings | None = _opt(None, "LoRA adapters; null trains the whole model")

    def apply(self, config: AutoUIConfig) -> AutoUIConfig:
        """``config`` with these options in place of its own."""
        return dataclasses.replace(config, lora=self.lora)


#: Why a newer action type cannot be among the small agent's (or its uniform baseline's) types.
SMALL_TYPES_ONLY = (
    "the small agent chooses among AitW's seven types ("
    + ", ".join(t.value for t in AITW_TYPES)
    + "); long press, open app, wait and answer are for agents that write actions as text"
)


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
    epsilon: float = _opt(
        0.05,
        "share of a uniform choice mixed into the action-type and element choices, in sampling "
        "and log-probs alike; keeps a policy that never succeeds from collapsing (0: off)",
        min=0,
        lt=1,
    )
    seed: int = _opt(0, "seed of the initial weights", min=0)
    features: FeatureConfig = field(default_factory=FeatureConfig)
    # Options beyond element taps and instruction spans (docs/agent-actions.md); all off by
    # default, so agents saved before them load with them off.
    point_actions: bool = _opt(
        False,
        "taps at any point and drags from any point to any point: an anchor (a grid cell or an "
        "element's box), then one of offsets x offsets positions inside it",
    )
    grid: tuple[int, int] = _opt(
        (8, 8), "(columns, rows) of the coarse screen grid of point anchors and pixel cells"
    )
    offsets: int = _opt(4, "positions per side inside an anchor", min=1)
    cell_attention: Literal["shared", "gated"] = _opt(
        "shared",
        "how the grid cells (point_actions, pixels) join the encoder. shared: they are tokens "
        "of its transformer like any other; gated: the cells read every token but the others "
        "read the cells only through a cross-attention whose output starts at zero, so cells "
        "added to a saved agent (agent.init_from) leave its states as they were until training "
        "opens the gate",
    )
    page_text: bool = _opt(False, "type spans of an element's text (page text)")
    free_text: bool = _opt(
        False, "type any text with a character decoder that copies instruction characters"
    )
    max_chars: int = _opt(24, "longest text the character decoder writes", min=1)

    def __post_init__(self) -> None:
        if isinstance(self.features, dict):
            self.features = FeatureConfig(**self.features)
        self.grid = (int(self.grid[0]), int(self.grid[1]))
        if min(self.grid) < 1 or self.offsets < 1 or self.max_chars < 1:
            raise ValueError("grid, offsets and max_chars must be >= 1")
        if self.cell_attention not in ("shared", "gated"):
            raise ValueError(
                f"cell_attention {self.cell_attention!r}: expected 'shared' or 'gated'"
            )
        if self.page_text and not self.features.elem_words:
            self.features = dataclasses.replace(self.features, elem_words=12)
        if self.allowed_types is not None:
            self.allowed_types = tuple(ActionType(t).value for t in self.allowed_types)
            beyond = [t for t in self.allowed_types if ActionType(t) not in AITW_TYPES]
            if beyond:
                raise ValueError(f"allowed_types {beyond}: {SMALL_TYPES_ONLY}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} must be divisible by n_heads {self.n_heads}")
        if self.temperature <= 0:
            raise ValueError("temperature must be > 0 (use greedy=True for argmax actions)")
        if not 0.0 <= self.epsilon < 1.0:
            raise ValueError(f"epsilon must be in [0, 1), got {self.epsilon}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def n_cells(self) -> int:
        """Grid cells the encoder adds as tokens (0 when nothing uses them)."""
        return self.grid[0] * self.grid[1] if self.point_actions or self.features.pixels else 0


#: The action heads a run may add to the small agent (``agent.small.heads``), beyond taps on
#: elements and typed instruction spans, which it always has: name -> what the head does.
SMALL_HEADS: dict[str, str] = {
    "swipes": "four fixed swipes (up, down, left, right) from the screen centre",
    "points": "taps at any point and drags from any point to any point",
    "page_text": "typed spans of an element's text",
    "free_text": "typed text of any kind, from a character decoder that copies instruction "
    "characters",
}
#: The optional inputs of the small agent (``agent.small.inputs``): name -> what it adds.
SMALL_INPUTS: dict[str, str] = {
    "pixels": "per-element and per-grid-cell features of the screenshot from a small CNN "
    "(with env.options.screenshot=true)",
    "field_labels": "text fields known by their label's words (docs/agents.md)",
}


def _names_help(what: str, names: dict[str, str]) -> str:
    return f"{what}: " + "; ".join(f"{name}: {text}" for name, text in names.items())


@dataclass
class SmallAgentOptions:
    """The small agent as a run configures it (``agent.small``): its size, action space, input
    features and exploration floor. Everything else about its architecture is
    `SmallAgentConfig`'s default, and a saved agent carries its whole `SmallAgentConfig` with
    its weights."""

    d_model: int = _opt(128, "transformer width (a multiple of 4)", min=4)
    allowed_types: tuple[str, ...] | None = _opt(
        None,
        "action types the agent may choose (ActionType names, e.g. [DUAL_POINT, TYPE]); null: all",
    )
    heads: tuple[str, ...] = _opt(
        ("swipes",),
        _names_help(
            "action heads beyond taps on elements and typed instruction spans (e.g. "
            "[points, page_text]; []: none)",
            SMALL_HEADS,
        ),
    )
    inputs: tuple[str, ...] = _opt(
        (), _names_help("inputs beyond the DOM elements and the instruction", SMALL_INPUTS)
    )
    cell_attention: Literal["shared", "gated"] = _opt(
        "shared",
        "how grid cells join the encoder; gated: cells added to a saved agent (agent.init_from) "
        "leave its states as they were until training opens the gate",
    )
    epsilon: float = _opt(
        0.05,
        "share of a uniform choice mixed into the action-type and element choices, in sampling "
        "and log-probs alike (0: off)",
        min=0,
        lt=1,
    )

    def validate(self) -> None:
        if self.d_model % 4:
            raise ConfigError(f"agent.small.d_model={self.d_model}: must be a multiple of 4")
        for t in self.allowed_types or ():
            if t not in ActionType.__members__ and t not in {a.value for a in ActionType}:
                raise ConfigError(f"agent.small.allowed_types: {t!r} is not an action type")
            if ActionType(t) not in AITW_TYPES:
                raise ConfigError(f"agent.small.allowed_types: {t!r}: {SMALL_TYPES_ONLY}")
        for key, names, known in (
            ("heads", self.heads, SMALL_HEADS),
            ("inputs", self.inputs, SMALL_INPUTS),
        ):
            for name in names:
                if name not in known:
                    raise ConfigError(
                        f"agent.small.{key}: {name!r} is not one of {', '.join(known)}"
                    )

    def architecture(self, seed: int = 0) -> SmallAgentConfig:
        """The full `SmallAgentConfig` these options describe (the rest at its defaults)."""
        self.validate()
        features = FeatureConfig(
            pixels="pixels" in self.inputs, field_labels="field_labels" in self.inputs
        )
        return SmallAgentConfig(
            d_model=self.d_model,
            d_ff=2 * self.d_model,
            allowed_types=self.allowed_types,
            swipes="swipes" in self.heads,
            point_actions="points" in self.heads,
            page_text="page_text" in self.heads,
            free_text="free_text" in self.heads,
            cell_attention=self.cell_attention,
            epsilon=self.epsilon,
            seed=seed,
            features=features,
        )


#: The settings every agent kind may share, set once for the run (``agent.temperature``,
#: ``agent.history``, ``agent.include_elements``): kind -> those its agent reads.
AGENT_SETTINGS: dict[str, tuple[str, ...]] = {
    "small": ("temperature",),
    "autoui": ("temperature", "history"),
    "vlm": ("temperature", "history", "include_elements"),
    "api": ("temperature", "history", "include_elements"),
}
#: Run options older run configs saved under ``agent.small``, with the value the code now uses.
RETIRED_SMALL: dict[str, Any] = {"n_layers": 2}
#: Run options older run configs saved under ``agent.autoui``: the saved agent's own values are
#: used now (these defaults for a bare checkpoint).
RETIRED_AUTOUI: dict[str, Any] = {
    f.name: f.default
    for f in dataclasses.fields(AutoUIConfig)
    if f.name != "lora" and f.name not in AGENT_SETTINGS["autoui"]
}
#: Run options older run configs saved under ``agent.vlm``, with the value the code now uses.
RETIRED_VLM: dict[str, Any] = {"output_format": "json", "train_vision": False}
#: The codec of a VLM run saved before ``agent.vlm.codec`` existed (its actions were JSON).
VLM_CODEC_BEFORE = "json"
#: The switches older run configs saved under ``agent.small``: name -> (list, its entry).
SMALL_SWITCHES: dict[str, tuple[str, str]] = {
    "swipes": ("heads", "swipes"),
    "point_actions": ("heads", "points"),
    "page_text": ("heads", "page_text"),
    "free_text": ("heads", "free_text"),
    "pixels": ("inputs", "pixels"),
    "field_labels": ("inputs", "field_labels"),
}


def _hoist_settings(out: dict[str, Any]) -> None:
    """Move the per-kind copies of `AGENT_SETTINGS` older run configs saved (``agent.vlm.history``
    ...) to the agent's own keys: the copy of the kind the run built, where the run applied it
    (a new small agent's, not a saved one's), unless the key is already set; the others were
    never read and are dropped."""
    kind = out.get("kind", "small")
    for section, keys in AGENT_SETTINGS.items():
        held = out.get(section)
        if not isinstance(held, Mapping):
            continue
        held = dict(held)
        applied = section == kind and not (kind == "small" and out.get("path") is not None)
        for key in keys:
            if key in held:
                value = held.pop(key)
                if applied:
                    out.setdefault(key, value)
        out[section] = held


def upgrade_saved_agent(data: Mapping[str, Any]) -> dict[str, Any]:
    """A saved run config's ``agent`` section (an `AgentSpec` as a mapping) in today's layout:
    the small agent's switches of older versions become its ``heads`` / ``inputs`` lists, the
    per-kind temperature, history and element list become the agent's own settings, the
    options no longer chosen by a run are dropped (a value other than the one now used is
    logged), and a VLM run saved before codecs keeps its JSON actions. Anything else, unknown
    keys included, is left for the loader to check."""
    out = dict(data)
    _hoist_settings(out)
    small = out.get("small")
    if isinstance(small, Mapping):
        small = dict(small)
        drop_retired(small, RETIRED_SMALL, "agent.small.")
        if any(k in small for k in SMALL_SWITCHES):  # an older layout (swipes were on unset)
            lists: dict[str, list[str]] = {"heads": [], "inputs": []}
            for key, (target, name) in SMALL_SWITCHES.items():
                if small.pop(key, key == "swipes"):
                    lists[target].append(name)
            small.setdefault("heads", lists["heads"])
            small.setdefault("inputs", lists["inputs"])
        out["small"] = small
    autoui = out.get("autoui")
    if isinstance(autoui, Mapping):
        autoui = dict(autoui)
        drop_retired(autoui, RETIRED_AUTOUI, "agent.autoui.", "the saved agent's (default {now!r})")
        out["autoui"] = autoui
    vlm = out.get("vlm")
    if isinstance(vlm, Mapping):
        vlm = dict(vlm)
        drop_retired(vlm, RETIRED_VLM, "agent.vlm.")
        if out.get("kind") == "vlm":  # a run from before codecs trained JSON actions
            vlm.setdefault("codec", VLM_CODEC_BEFORE)
        out["vlm"] = vlm
    return out
