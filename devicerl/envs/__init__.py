"""Devices: the `DeviceEnv` API, the registry and the built-in backends.

Devices named after a task suite (``synthetic/*``, ``miniwob``, ``miniwob/*``) are registered by
`devicerl.tasks`, which knows the task names; importing it makes them available.
"""

from devicerl.envs.base import DeviceEnv, TaskStatus
from devicerl.envs.registry import EnvSpec, make, register, registered

register("synthetic", "devicerl.envs.synthetic:SyntheticEnv")
register("browser", "devicerl.envs.browser.paged:make_browser")
register("android", "devicerl.envs.android.env:AndroidEnv")
register("foreign", "devicerl.envs.foreign.env:ForeignEnv")

__all__ = ["DeviceEnv", "EnvSpec", "TaskStatus", "make", "register", "registered"]
