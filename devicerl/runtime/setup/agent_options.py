"""No agent option is ignored: one the run's agent kind does not read is refused, and with a
saved small agent (``agent.path``) an ``agent.small`` option set to other than what the agent
was saved with is refused too (a saved agent runs as it was saved; ``agent.init_from`` builds a
new one from its weights). Each refusal is one `ConfigError` line naming the option."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from devicerl.actions import ActionType
from devicerl.agents.config import SmallAgentOptions
from devicerl.agents.factory import AgentSpec
from devicerl.errors import ConfigError, DataError
from devicerl.files import read_text

#: The options of ``agent`` each kind reads beyond its kind, device, seed and the agent-wide
#: settings (which `AgentSpec.validate` checks); the others must stay at their defaults.
READS: dict[str, tuple[str, ...]] = {
    "small": ("small", "path", "init_from"),
    "uniform": ("small",),
    "uniform_clickable": ("small",),
    "autoui": ("autoui", "path", "vision_dir"),
    "vlm": ("vlm", "path"),
    "api": ("api",),
    "random": (),
    "oracle": (),
}
#: A saved small agent's config file (`devicerl.agents.small.CONFIG_FILE`).
SMALL_AGENT_FILE = "small_agent.json"


def check_agent_options(where: str, spec: AgentSpec) -> None:
    """Refuse an option of ``spec`` (the agent at ``where``) that would be ignored."""
    defaults = AgentSpec()
    for name in ("small", "api", "autoui", "vlm", "path", "init_from", "vision_dir"):
        default = getattr(defaults, name)
        if name not in READS.get(spec.kind, ()) and getattr(spec, name) != default:
            reset = "null" if default is None else "{}"  # drops a config file's block
            raise ConfigError(
                f"{where}.{name}: the {spec.kind} agent does not read it (leave it out, or "
                f"set {where}.{name}={reset})"
            )
    if spec.kind == "small" and spec.path is not None and Path(spec.path).is_dir():
        _check_saved_small(where, spec)


def _view(options: SmallAgentOptions) -> dict[str, Any]:
    """What each ``agent.small`` option makes of the agent, comparable with a saved config."""
    arch = options.architecture()
    return {
        "d_model": arch.d_model,
        "allowed_types": sorted(arch.allowed_types) if arch.allowed_types else None,
        "heads": [h for h, on in (("swipes", arch.swipes), ("points", arch.point_actions),
                  ("page_text", arch.page_text), ("free_text", arch.free_text)) if on],
        "inputs": [i for i, on in (("pixels", arch.features.pixels),
                   ("field_labels", arch.features.field_labels)) if on],
        "cell_attention": arch.cell_attention,
        "epsilon": arch.epsilon,
    }  # fmt: skip


def _saved_view(path: Path) -> dict[str, Any]:
    """`_view` of the options a saved small agent was built with (its JSON config)."""
    try:
        meta = json.loads(read_text(path / SMALL_AGENT_FILE, 1 << 20, what="saved agent config"))
        cfg, features = meta["config"], meta["config"].get("features", {})
        types = cfg.get("allowed_types")
        return {
            "d_model": cfg["d_model"],
            "allowed_types": sorted(ActionType(t).value for t in types) if types else None,
            "heads": [h for h, k in (("swipes", "swipes"), ("points", "point_actions"),
                      ("page_text", "page_text"), ("free_text", "free_text")) if cfg.get(k)],
            "inputs": [i for i in ("pixels", "field_labels") if features.get(i)],
            "cell_attention": cfg.get("cell_attention", "shared"),
            "epsilon": cfg.get("epsilon", cfg.get("explore")),
        }  # fmt: skip
    except (DataError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ConfigError(
            f"agent.path: {path} holds no readable {SMALL_AGENT_FILE} ({e})"
        ) from None


def _check_saved_small(where: str, spec: AgentSpec) -> None:
    """Each ``agent.small`` option set (not at its default) agrees with the saved agent."""
    own, default = _view(spec.small), _view(SmallAgentOptions())
    saved = _saved_view(Path(spec.path or ""))
    for name, value in own.items():
        if value != default[name] and value != saved[name]:
            raise ConfigError(
                f"{where}.small: {name} {value} is not the saved agent's ({saved[name]}, "
                f"{where}.path): a saved agent runs as saved; leave {where}.small.{name} out, "
                f"or build a new agent from its weights with {where}.init_from"
            )
