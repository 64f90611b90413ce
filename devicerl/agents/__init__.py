"""Agents: the `Policy` interface and its implementations.

- `SmallAgent` (``devicerl.agents.small``): the default small CPU transformer agent.
- `AutoUIAgent` (``devicerl.agents.autoui``): T5 + fused vision features, AutoUI text format.
- `VLMAgent` (``devicerl.agents.vlm.agent``): any Hugging Face image-text-to-text model (Qwen-VL,
  Idefics3 / SmolVLM, Gemma 3), LoRA or full fine-tuning, locally or through a server.
- `APIAgent` (``devicerl.agents.api``): any OpenAI-compatible chat endpoint (evaluation only).
- `RandomPolicy`, `SyntheticOracle`: baselines and demonstrations.

The heavy agents are imported on first use, so ``import devicerl.agents`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

from devicerl.agents.base import (
    ActionSample,
    FunctionPolicy,
    Policy,
    as_policy,
    require_trainable,
)
from devicerl.agents.random import RandomPolicy

_LAZY = {
    "SmallAgent": "devicerl.agents.small",
    "SmallAgentConfig": "devicerl.agents.small.config",
    "SmallEncoder": "devicerl.agents.small.encoder",
    "Featurizer": "devicerl.agents.small.featurize",
    "FeatureConfig": "devicerl.agents.small.config",
    "featurize": "devicerl.agents.small.featurize",
    "AutoUIAgent": "devicerl.agents.autoui",
    "AutoUIConfig": "devicerl.agents.autoui",
    "LoRASettings": "devicerl.agents.autoui",
    "VLMAgent": "devicerl.agents.vlm.agent",
    "VLMConfig": "devicerl.agents.vlm.config",
    "APIAgent": "devicerl.agents.api",
    "APIAgentConfig": "devicerl.agents.api",
    "SyntheticOracle": "devicerl.agents.scripted",
}

__all__ = [
    "ActionSample",
    "FunctionPolicy",
    "Policy",
    "RandomPolicy",
    "as_policy",
    "require_trainable",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'devicerl.agents' has no attribute {name!r}")
