"""Registry of device backends: ``make(name, **kwargs)``.

Names are exact (``"synthetic"``, ``"browser"``) or patterns ending in ``/*`` (``"miniwob/*"``):
``make("miniwob/click-test")`` calls the ``miniwob/*`` factory with ``task="miniwob/click-test"``.
Factories may be given as ``"module:attr"`` strings so optional backends import lazily.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from devicerl.envs.base import DeviceEnv
from devicerl.errors import ConfigError

Factory = Callable[..., DeviceEnv]

_REGISTRY: dict[str, Factory | str] = {}


def register(name: str, factory: Factory | str, *, overwrite: bool = False) -> None:
    """Register a backend under ``name`` (exact, or a ``prefix/*`` pattern)."""
    if name in _REGISTRY and not overwrite:
        raise ConfigError(f"device {name!r} is already registered")
    _REGISTRY[name] = factory


def registered() -> list[str]:
    return sorted(_REGISTRY)


def _load(factory: Factory | str) -> Factory:
    if isinstance(factory, str):
        module, _, attr = factory.partition(":")
        return getattr(importlib.import_module(module), attr)
    return factory


def lookup(name: str) -> tuple[Factory | str, dict[str, Any]]:
    """The registry entry `make` uses for ``name`` and the keyword arguments it adds.

    Worker processes receive this pair instead of the name, because a backend registered at
    run time in the parent is missing from a fresh process's registry.
    """
    if name in _REGISTRY:
        return _REGISTRY[name], {}
    prefix = name.split("/", 1)[0]
    pattern = f"{prefix}/*"
    if "/" in name and pattern in _REGISTRY:
        return _REGISTRY[pattern], {"task": name}
    raise ConfigError(
        f"unknown device {name!r}; registered: {', '.join(registered())} (devices named after "
        "a task suite, e.g. miniwob/*, are registered by importing devicerl.tasks)"
    )


def build(factory: Factory | str, kwargs: dict[str, Any]) -> DeviceEnv:
    """Call a registry entry (a factory or a ``"module:attr"`` string) with ``kwargs``."""
    return _load(factory)(**kwargs)


def make(name: str, **kwargs: Any) -> DeviceEnv:
    """Build a device by registry name; a ``suite/task`` name also sets the default task."""
    factory, extra = lookup(name)
    return build(factory, {**extra, **kwargs})


def check_options(name: str, kwargs: Mapping[str, Any]) -> None:
    """Raise `ConfigError` when ``name`` is unknown or its factory takes no option of one of
    ``kwargs``' names, without building a device (no browser or emulator is started).

    A factory that passes ``**options`` on names where they go in ``forwards_options_to``
    (a callable or ``"module:attr"``); without it, any option is accepted here.
    """
    factory, _ = lookup(name)
    accepted = _accepted_options(_load(factory))
    if accepted is None:
        return
    unknown = sorted(k for k in kwargs if k not in accepted)
    if unknown:
        near = difflib.get_close_matches(unknown[0], sorted(accepted), n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise ConfigError(f"device {name!r} has no option {unknown[0]!r}{hint}")


def _accepted_options(fn: Callable[..., Any]) -> set[str] | None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    names = {
        p.name
        for p in params
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in ("self", "task")
    }
    if any(p.kind is p.VAR_KEYWORD for p in params):
        target = getattr(fn, "forwards_options_to", None)
        if target is None:
            return None
        more = _accepted_options(_load(target))
        return None if more is None else names | more
    return names


@dataclass(frozen=True)
class EnvSpec:
    """A picklable recipe for a device: what worker processes receive to build their own."""

    name: str
    kwargs: dict[str, Any] = field(default_factory=dict, hash=False)

    def make(self) -> DeviceEnv:
        return make(self.name, **self.kwargs)
