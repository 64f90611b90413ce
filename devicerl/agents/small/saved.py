"""A saved small agent: ``model.safetensors`` (its network's state dict) and ``small_agent.json``
(``{"config": SmallAgentConfig, "version": its policy version, "format_version": N}``).

Format versions (a file without ``format_version`` is version 1):

1. The config switches the heads on one by one (``swipes``, ``point_actions``, ``page_text``,
   ``free_text``; swipes on when unset) and has no ``type_classes`` (AitW's seven). Within it, a
   ``format`` of 1 (or none) called the exploration floor ``explore`` and had an
   ``explore_spans`` switch (always off in saved agents); agents saved before ``history`` and
   ``role_mention`` existed had them off.
2. The heads are a list (``heads``) and the type head's classes are saved (``type_classes``).

The weights have the same names in every version (each part registers its layers under the
names they always had), so only the config is upgraded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from devicerl.agents.small.config import SmallAgentConfig, heads_from_switches
from devicerl.agents.torch_policy import read_json, write_json
from devicerl.errors import DataError

WEIGHTS_FILE, CONFIG_FILE = "model.safetensors", "small_agent.json"
#: The format `write` saves (see the module doc).
FORMAT_VERSION = 2


def format_version(meta: dict[str, Any]) -> int:
    return int(meta.get("format_version", 1))


def saved_config(meta: dict[str, Any], path: str | Path) -> SmallAgentConfig:
    """The `SmallAgentConfig` of a saved agent's JSON, whatever its format (module doc)."""
    cfg = dict(meta.get("config", {}))
    if format_version(meta) < 2:
        if int(meta.get("format", 1)) < 2:
            if "explore" in cfg:
                cfg["epsilon"] = cfg.pop("explore")
            if cfg.pop("explore_spans", False):
                raise DataError(f"{path}/{CONFIG_FILE}: explore_spans is no longer supported")
        cfg = heads_from_switches({"swipes": cfg.pop("swipes", True), **cfg})
    for key in ("allowed_types", "heads", "type_classes"):
        if cfg.get(key) is not None:
            cfg[key] = tuple(cfg[key])
    features = dict(cfg.pop("features", {}))
    for newer in ("history", "role_mention"):
        features.setdefault(newer, False)
    if features.get("screenshot_size") is not None:
        features["screenshot_size"] = tuple(features["screenshot_size"])
    try:
        return SmallAgentConfig(**cfg, features=features)  # type: ignore[arg-type]
    except TypeError as e:
        raise DataError(f"{path}/{CONFIG_FILE}: unknown config field ({e})") from None
    except ValueError as e:
        raise DataError(f"{path}/{CONFIG_FILE}: {e}") from None


def read_meta(path: str | Path) -> dict[str, Any]:
    """The saved JSON (a missing or malformed file: a `DataError` naming it)."""
    return read_json(Path(path) / CONFIG_FILE)


def write(path: str | Path, config: SmallAgentConfig, version: int, state: dict) -> None:
    """Save the weights ``state`` and the config in the current format."""
    from safetensors.torch import save_file

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().cpu().contiguous() for k, v in state.items()}, str(out / WEIGHTS_FILE))
    meta = {"config": config.to_dict(), "version": version, "format_version": FORMAT_VERSION}
    write_json(out / CONFIG_FILE, meta)


def read_weights(path: str | Path, device: torch.device) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    src = Path(path) / WEIGHTS_FILE
    try:
        return load_file(str(src), device=str(device))
    except (OSError, SafetensorError) as e:
        raise DataError(f"{src}: cannot read weights ({e})") from None
