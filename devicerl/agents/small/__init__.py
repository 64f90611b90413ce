"""The small CPU agent: a 2-layer transformer over the instruction's tokens and the screen's
elements whose action is chosen in parts (docs/agents.md).

- `agent`: `SmallAgent` (acting, scoring); `saved`: its files and their format versions;
- `featurize`: observations to tensors (with `columns`, the named layout of their rows,
  `field_labels`, `pixels`, `tokenize`); `encoder` and `net`: its network;
- `parts` and `heads/`: the action as parts (the type, a router per type, one head per way to
  produce an action); `registry`: the heads a run may add, by name;
- `config`: its torch-free configuration; `uniform`: the uniform baseline over what it can
  express.

The names below are imported on first use, so reading the configuration costs no torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "SmallAgent": "devicerl.agents.small.agent",
    "UNREPRESENTABLE_LOG_PROB": "devicerl.agents.small.agent",
    "SmallAgentConfig": "devicerl.agents.small.config",
    "FeatureConfig": "devicerl.agents.small.config",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'devicerl.agents.small' has no attribute {name!r}")
