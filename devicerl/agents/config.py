# ruff: noqa: RUF009  (`_opt` builds a `dataclasses.field`, no shared mutable default)
"""The agents' configuration dataclasses, apart from their torch code.

`devicerl train --help` (and every config load) needs these classes but not the models, so they
live here, where importing them costs no torch (the small agent's are in
`devicerl.agents.small.config`). `devicerl.agents.autoui` re-exports its own under their old
names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from devicerl.agents.small.config import HEAD_SWITCHES, heads_from_switches
from devicerl.config import drop_retired
from devicerl.errors import ConfigError


def _opt(default: Any, help: str, **bounds: float) -> Any:
    """A field with its ``--help`` text and bounds (checked by `devicerl.config` at load)."""
    return field(default=default, metadata={"help": help, **bounds})


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
#: The input switches older run configs saved under ``agent.small``: name -> the input (those
#: of its heads are `devicerl.agents.small.config.HEAD_SWITCHES`).
INPUT_SWITCHES: dict[str, str] = {"pixels": "pixels", "field_labels": "field_labels"}


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
        if any(k in small for k in (*HEAD_SWITCHES, *INPUT_SWITCHES)):  # an older layout
            inputs = [name for key, name in INPUT_SWITCHES.items() if small.pop(key, False)]
            small = heads_from_switches({"swipes": small.pop("swipes", True), **small})
            small.setdefault("inputs", inputs)
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
