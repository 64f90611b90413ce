"""Action codecs: the action language of each GUI model family, as parts (`ActionCodec`).

A codec writes an `Action` as the text a family was trained to write and reads it back, and
writes the prompt that tells the family its action space; coordinates go through the
`ImageGeometry` of the image the model sees. Chosen by name (`make_codec`; ``agent.vlm.codec``
for the VLM agent), with a default per model family (`default_codec`):

========================  ==========================================  ========================
name                      family / format                             coordinates
========================  ==========================================  ========================
``json``                  devicerl's JSON (default of other families)  [0, 1] of the screen
``autoui``                AutoUI's text (the API agent's default)     [0, 1] of the screen
``mobile_use``            Qwen2.5-VL ``mobile_use`` tool calls         pixels of the resized
                                                                      image
``mobile_use_qwen3``      Qwen3-VL ``mobile_use`` tool calls           0-999 across the image
``ui_tars``               UI-TARS ``click(start_box=...)``             0-1000 across the image
``ui_tars_1_5``           UI-TARS-1.5                                  pixels of the resized
                                                                      image
``aguvis``                Aguvis-style ``pyautogui.click(x=, y=)``     [0, 1] of the image
========================  ==========================================  ========================

This package sits below agents and judges (both use it) and imports no model code.
"""

from __future__ import annotations

from devicerl.codecs.aguvis import Aguvis
from devicerl.codecs.autoui import AutoUICodec
from devicerl.codecs.base import ActionCodec, PromptStep, fold_system, message, openai_messages
from devicerl.codecs.geometry import ImageGeometry, KeepSize, SmartResize, smart_resize
from devicerl.codecs.json_actions import JSONCodec
from devicerl.codecs.qwen import MobileUse, MobileUseQwen3
from devicerl.codecs.uitars import UITars, UITars15
from devicerl.errors import ConfigError

CODECS: dict[str, type[ActionCodec]] = {
    c.name: c for c in (JSONCodec, AutoUICodec, MobileUse, MobileUseQwen3, UITars, UITars15, Aguvis)
}
#: A model family's own codec (``model_type`` of its ``config.json``); others default to JSON.
FAMILY_CODECS = {"qwen2_5_vl": "mobile_use", "qwen3_vl": "mobile_use_qwen3"}
DEFAULT = "json"


def make_codec(name: str) -> ActionCodec:
    """The codec called ``name``; a `ConfigError` naming the known ones otherwise."""
    try:
        return CODECS[name]()
    except (KeyError, TypeError):
        raise ConfigError(f"codec {name!r}: expected one of {', '.join(CODECS)}") from None


def default_codec(model_type: str | None) -> str:
    """The codec a model of this family speaks unless told otherwise."""
    return FAMILY_CODECS.get(model_type or "", DEFAULT)


__all__ = [
    "CODECS",
    "FAMILY_CODECS",
    "ActionCodec",
    "Aguvis",
    "AutoUICodec",
    "ImageGeometry",
    "JSONCodec",
    "KeepSize",
    "MobileUse",
    "MobileUseQwen3",
    "PromptStep",
    "SmartResize",
    "UITars",
    "UITars15",
    "default_codec",
    "fold_system",
    "make_codec",
    "message",
    "openai_messages",
    "smart_resize",
]
