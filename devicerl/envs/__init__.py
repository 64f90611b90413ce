"""Devices: the `DeviceEnv` API, the registry and the built-in backends, each registered with
the dataclass of its options.

Devices named after a task suite (``synthetic/*``, ``miniwob``, ``miniwob/*``) are registered by
`devicerl.tasks`, which knows the task names; importing it makes them available.
"""

from devicerl.envs.base import DeviceEnv, TaskStatus
from devicerl.envs.registry import EnvSpec, make, register, registered

register(
    "synthetic",
    "devicerl.envs.synthetic:SyntheticEnv",
    options="devicerl.envs.synthetic:SyntheticOptions",
)
register(
    "browser",
    "devicerl.envs.browser.paged:make_browser",
    options="devicerl.envs.browser.options:BrowserOptions",
)
register(
    "android",
    "devicerl.envs.android.env:AndroidEnv",
    options="devicerl.envs.android.options:AndroidOptions",
)
register(
    "androidworld",
    "devicerl.envs.androidworld.env:AndroidWorldEnv",
    options="devicerl.envs.androidworld.options:AndroidWorldOptions",
)
register(
    "foreign",
    "devicerl.envs.foreign.env:ForeignEnv",
    options="devicerl.envs.foreign.options:ForeignOptions",
)

__all__ = ["DeviceEnv", "EnvSpec", "TaskStatus", "make", "register", "registered"]
