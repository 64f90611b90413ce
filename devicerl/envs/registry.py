"""Registry of device backends: ``make(name, **kwargs)``.

Names are exact (``"synthetic"``, ``"browser"``) or patterns ending in ``/*`` (``"miniwob/*"``):
``make("miniwob/click-test")`` calls the ``miniwob/*`` factory with ``task="miniwob/click-test"``.
Factories may be given as ``"module:attr"`` strings so optional backends import lazily.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
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


@dataclass(frozen=True)
class EnvSpec:
    """A picklable recipe for a device: what worker processes receive to build their own."""

    name: str
    kwargs: dict[str, Any] = field(default_factory=dict, hash=False)

    def make(self) -> DeviceEnv:
        return make(self.name, **self.kwargs)
