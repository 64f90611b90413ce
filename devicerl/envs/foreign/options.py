"""The options of a ``foreign`` device (`devicerl.envs.foreign.env.ForeignEnv`), read by the
config loader like every device's (``env.options`` of a run, or ``make("foreign", python=...)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from devicerl.errors import ConfigError


@dataclass(frozen=True)
class ForeignOptions:
    """Options of a ``foreign`` device: which interpreter hosts it and which class it is."""

    #: The interpreter of the device's own environment (e.g. ``/opt/envs/x/bin/python``).
    python: str = field(metadata={"help": "interpreter of the device's own environment"})
    #: ``module:Class`` importable there, or ``/path/to/file.py:Class``.
    device: str = field(metadata={"help": "the device class: MODULE:CLASS or FILE.py:CLASS"})
    #: Keyword arguments of the device class (plain data).
    options: dict[str, Any] = field(default_factory=dict, metadata={"help": "its arguments"})

    def __post_init__(self) -> None:
        if ":" not in self.device:
            raise ConfigError(f"foreign device {self.device!r} is not MODULE:CLASS or FILE:CLASS")
