"""Typed errors shared across devicerl.

Each error names its culprit (a device, a file, a config key) so a failure can be acted on
without reading a traceback.
"""

from __future__ import annotations


class DeviceRLError(Exception):
    """Base class of every error devicerl raises on purpose."""


class ConfigError(DeviceRLError, ValueError):
    """A configuration value is unknown or invalid; raised at start, in one line."""


class DeviceError(DeviceRLError, RuntimeError):
    """A device failed in a way the pool should handle by restarting it."""


class DeviceCrashed(DeviceError):
    """The device (its process, browser or emulator) is gone."""


class DeviceTimeout(DeviceError):
    """The device did not answer within its deadline."""


class DataError(DeviceRLError, ValueError):
    """A data file is corrupt, partial or of an unknown schema; the message names the file."""


class PathError(DeviceRLError, ValueError):
    """A path cannot be used as asked: it leads outside its folder, is not a regular file, or
    cannot be written (names too long, folder not writable); the message names the path."""


class TaskError(DeviceRLError, ValueError):
    """A task name or task list cannot be resolved."""


class AuthError(DeviceRLError, PermissionError):
    """An endpoint refused our credentials (HTTP 401/403): fatal, never retried; the message
    names the endpoint and the environment variable that holds the key (never the key)."""


class RunError(DeviceRLError):
    """A run folder cannot be used as asked (it exists, or another process holds it)."""
