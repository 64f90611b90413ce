"""Registry of device kinds: ``make(name, **options)``.

A name is exact (``"synthetic"``, ``"browser"``) or a pattern ending in ``/*`` (``"miniwob/*"``):
``make("miniwob/click-test")`` calls the ``miniwob/*`` factory with ``task="miniwob/click-test"``.
Each name registers its factory and the dataclass of its options (`register`), and a factory is
called as ``factory(task=..., options=<that dataclass>)``. Options reach a device only through
that dataclass, read by the config loader (`devicerl.config.from_dict`: types, bounds from field
metadata, one-line errors naming the key), whether they come from a run config's
``env.options`` or from ``make(name, screenshot=False)``. Adding a device kind is its options
dataclass plus one `register` line. Factories and option classes may be given as
``"module:attr"`` strings so optional backends import lazily.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from devicerl.config import from_dict
from devicerl.envs.base import DeviceEnv
from devicerl.errors import ConfigError

Factory = Callable[..., DeviceEnv]


@dataclass
class NoOptions:
    """The options of a device kind that takes none."""


@dataclass(frozen=True)
class _Kind:
    factory: Factory | str
    options: type | str


_REGISTRY: dict[str, _Kind] = {}


def register(
    name: str,
    factory: Factory | str,
    *,
    options: type | str = NoOptions,
    overwrite: bool = False,
) -> None:
    """Register a backend under ``name`` (exact, or a ``prefix/*`` pattern) with the dataclass
    of its options (a class or ``"module:attr"``)."""
    if name in _REGISTRY and not overwrite:
        raise ConfigError(f"device {name!r} is already registered")
    _REGISTRY[name] = _Kind(factory, options)


def registered() -> list[str]:
    return sorted(_REGISTRY)


def _load(target: Any) -> Any:
    if isinstance(target, str):
        module, _, attr = target.partition(":")
        return getattr(importlib.import_module(module), attr)
    return target


def _entry(name: str) -> tuple[_Kind, dict[str, Any]]:
    if name in _REGISTRY:
        return _REGISTRY[name], {}
    pattern = f"{name.split('/', 1)[0]}/*"
    if "/" in name and pattern in _REGISTRY:
        return _REGISTRY[pattern], {"task": name}
    raise ConfigError(
        f"unknown device {name!r}; registered: {', '.join(registered())} (devices named after "
        "a task suite, e.g. miniwob/*, are registered by importing devicerl.tasks)"
    )


def lookup(name: str) -> tuple[Factory | str, dict[str, Any]]:
    """The registry entry `make` uses for ``name`` and the keyword arguments it adds.

    Worker processes receive this pair instead of the name, because a backend registered at
    run time in the parent is missing from a fresh process's registry.
    """
    kind, extra = _entry(name)
    return kind.factory, extra


def options_type(name: str) -> type:
    """The options dataclass of device ``name``."""
    return _load(_entry(name)[0].options)


def option_kinds() -> dict[type, list[str]]:
    """Every options dataclass with the names registered with it (for ``--help``)."""
    out: dict[type, list[str]] = {}
    for name in registered():
        out.setdefault(_load(_REGISTRY[name].options), []).append(name)
    return out


def read_options(name: str, options: Any = None, key: str | None = None) -> Any:
    """Device ``name``'s options from ``options``: None (the defaults), a mapping (read by the
    config loader, errors named after ``key``, default the device's name) or the dataclass
    itself."""
    cls = options_type(name)
    if options is None:
        options = {}  # the defaults, or one line naming what has none
    if isinstance(options, Mapping):
        return from_dict(cls, options, prefix=key or name)
    if not isinstance(options, cls):
        raise ConfigError(
            f"{key or name}: expected a mapping (the options of device {name!r}, "
            f"{cls.__name__}), got {type(options).__name__}"
        )
    return options


def build(factory: Factory | str, kwargs: dict[str, Any]) -> DeviceEnv:
    """Call a registry entry (a factory or a ``"module:attr"`` string) with ``kwargs``."""
    return _load(factory)(**kwargs)


def make(name: str, options: Any = None, /, **fields: Any) -> DeviceEnv:
    """Build a device by registry name; a ``suite/task`` name also sets the default task.
    ``options`` is its options dataclass, or give them by name: ``make("browser",
    screenshot=False)``."""
    if options is not None and fields:
        raise ConfigError(f"{name}: give options as a dataclass or by name, not both")
    factory, extra = lookup(name)
    return build(factory, {**extra, "options": read_options(name, options or fields or None)})


@dataclass(frozen=True)
class EnvSpec:
    """A picklable recipe for a device: what worker processes receive to build their own.
    ``options`` (the device's options dataclass, or a mapping read into it) is checked here,
    in the process that names the device."""

    name: str
    options: Any = field(default=None, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", read_options(self.name, self.options))

    def make(self) -> DeviceEnv:
        return make(self.name, self.options)
