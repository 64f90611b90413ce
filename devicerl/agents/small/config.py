"""The small agent's configuration dataclasses, apart from its torch code.

`devicerl train --help` (and every config load) needs these classes but not the model, so they
live here, where importing them costs no torch: `SmallAgentConfig` (what a saved agent carries
with its weights), its `FeatureConfig`, and `SmallAgentOptions` (the run options,
``agent.small``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from devicerl.actions import AITW_TYPES, ActionType
from devicerl.agents.small.columns import ElemColumns, InstrColumns
from devicerl.agents.small.registry import HEADS
from devicerl.errors import ConfigError

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
        return InstrColumns.of(self).width

    @property
    def elem_features(self) -> int:
        return ElemColumns.of(self).width

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
class SmallAgentConfig:
    """Architecture and behaviour of the small agent (saved as JSON next to the weights)."""

    d_model: int = _opt(128, "transformer width (a multiple of n_heads)", min=1)
    n_layers: int = _opt(2, "transformer layers", min=1)
    n_heads: int = _opt(4, "attention heads", min=1)
    d_ff: int = _opt(256, "feed-forward width", min=1)
    dropout: float = _opt(0.0, "dropout rate", min=0, lt=1)
    max_span: int = _opt(12, "longest typed span, in instruction tokens", min=1)
    heads: tuple[str, ...] = _opt(
        ("swipes",),
        "the action heads beyond taps on elements and typed instruction spans, by name (see "
        "devicerl.agents.small.registry; kept in the registry's order)",
    )
    type_classes: tuple[str, ...] = _opt(
        tuple(t.value for t in AITW_TYPES),
        "the action types the type head chooses among, in the order of its outputs (AitW's "
        "seven); the featurizer's last-action columns follow it",
    )
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
    # Settings of the heads beyond element taps and instruction spans (docs/agent-actions.md).
    grid: tuple[int, int] = _opt(
        (8, 8), "(columns, rows) of the coarse screen grid of point anchors and pixel cells"
    )
    offsets: int = _opt(4, "positions per side inside an anchor", min=1)
    cell_attention: Literal["shared", "gated"] = _opt(
        "shared",
        "how the grid cells (points, pixels) join the encoder. shared: they are tokens "
        "of its transformer like any other; gated: the cells read every token but the others "
        "read the cells only through a cross-attention whose output starts at zero, so cells "
        "added to a saved agent (agent.init_from) leave its states as they were until training "
        "opens the gate",
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
        unknown = [h for h in self.heads if h not in HEADS]
        if unknown:
            raise ValueError(f"heads: {unknown[0]!r} is not one of {', '.join(HEADS)}")
        self.heads = tuple(h for h in HEADS if h in self.heads)
        self.type_classes = _type_names(self.type_classes, "type_classes")
        if len(set(self.type_classes)) < len(self.type_classes):
            raise ValueError(f"type_classes {list(self.type_classes)}: a type is listed twice")
        if self.allowed_types is not None:
            self.allowed_types = _type_names(self.allowed_types, "allowed_types")
            outside = [t for t in self.allowed_types if t not in self.type_classes]
            if outside:
                raise ValueError(f"allowed_types {outside}: {types_only(self.type_classes)}")
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
        """Grid cells the encoder adds as tokens (0 when no head points at them and no pixels
        are read). Imports the heads' classes (torch)."""
        cells = self.features.pixels or any(HEADS[h].load().uses_cells for h in self.heads)
        return self.grid[0] * self.grid[1] if cells else 0


#: Why a newer action type cannot be among the small agent's (or its uniform baseline's) types.
SMALL_TYPES_ONLY = (
    "the small agent chooses among AitW's seven types ("
    + ", ".join(t.value for t in AITW_TYPES)
    + "); long press, open app, wait and answer are for agents that write actions as text"
)


def types_only(type_classes: tuple[str, ...]) -> str:
    """Why a type outside an agent's type head cannot be allowed."""
    if type_classes == tuple(t.value for t in AITW_TYPES):
        return SMALL_TYPES_ONLY
    return f"the small agent's type head chooses among {', '.join(type_classes)}"


def _type_names(names: Any, key: str) -> tuple[str, ...]:
    """Action type names as `ActionType` values (a name that is none: a one-line error)."""
    out = []
    for name in names:
        try:
            out.append(ActionType(name).value)
        except ValueError:
            raise ValueError(f"{key}: {name!r} is not an action type") from None
    return tuple(out)


#: The switches of the heads older configs saved (run options and saved agents alike):
#: switch -> the head it turned on. Swipes were on when unset.
HEAD_SWITCHES: dict[str, str] = {
    "swipes": "swipes",
    "point_actions": "points",
    "page_text": "page_text",
    "free_text": "free_text",
}


def heads_from_switches(data: dict[str, Any]) -> dict[str, Any]:
    """An older config's mapping with its head switches as a ``heads`` list (``data`` itself
    when it has none; a ``heads`` it already has is kept)."""
    if not any(k in data for k in HEAD_SWITCHES):
        return data
    out = dict(data)
    heads = [head for key, head in HEAD_SWITCHES.items() if out.pop(key, key == "swipes")]
    out.setdefault("heads", heads)
    return out


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
            {name: entry.help for name, entry in HEADS.items()},
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
            ("heads", self.heads, HEADS),
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
            heads=self.heads,
            cell_attention=self.cell_attention,
            epsilon=self.epsilon,
            seed=seed,
            features=features,
        )
