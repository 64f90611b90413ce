"""No agent option is ignored: one the run's agent kind does not read is refused, and with a
saved small agent (``agent.path``) an ``agent.small`` option set to other than what the agent
was saved with is refused too (a saved agent runs as it was saved; ``agent.init_from`` builds a
new one from its weights). Each refusal is one `ConfigError` line naming the option."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devicerl.agents.factory import AgentSpec
from devicerl.agents.small.config import SmallAgentConfig, SmallAgentOptions
from devicerl.agents.small.saved import CONFIG_FILE as SMALL_AGENT_FILE
from devicerl.agents.small.saved import read_meta, saved_config
from devicerl.errors import ConfigError, DataError

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


def _view(arch: SmallAgentConfig) -> dict[str, Any]:
    """What the ``agent.small`` options set in an agent's architecture, comparable between a
    run's options and a saved agent."""
    return {
        "d_model": arch.d_model,
        "allowed_types": sorted(arch.allowed_types) if arch.allowed_types else None,
        "heads": list(arch.heads),
        "inputs": [i for i in ("pixels", "field_labels") if getattr(arch.features, i)],
        "cell_attention": arch.cell_attention,
        "epsilon": arch.epsilon,
    }


def _saved_view(path: Path) -> dict[str, Any]:
    """`_view` of a saved small agent (its JSON config, whatever its format)."""
    try:
        return _view(saved_config(read_meta(path), path))
    except (DataError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ConfigError(
            f"agent.path: {path} holds no readable {SMALL_AGENT_FILE} ({e})"
        ) from None


def _check_saved_small(where: str, spec: AgentSpec) -> None:
    """Each ``agent.small`` option set (not at its default) agrees with the saved agent."""
    own = _view(spec.small.architecture())
    default = _view(SmallAgentOptions().architecture())
    saved = _saved_view(Path(spec.path or ""))
    for name, value in own.items():
        if value != default[name] and value != saved[name]:
            raise ConfigError(
                f"{where}.small: {name} {value} is not the saved agent's ({saved[name]}, "
                f"{where}.path): a saved agent runs as saved; leave {where}.small.{name} out, "
                f"or build a new agent from its weights with {where}.init_from"
            )
