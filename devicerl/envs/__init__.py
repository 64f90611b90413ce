"""Devices: the `DeviceEnv` API, the registry and the built-in backends."""

from devicerl.envs.base import DeviceEnv, TaskStatus
from devicerl.envs.registry import EnvSpec, make, register, registered

register("synthetic", "devicerl.envs.synthetic:SyntheticEnv")
register("synthetic/*", "devicerl.envs.synthetic:SyntheticEnv")
register("browser", "devicerl.envs.browser.paged:make_browser")
register("miniwob", "devicerl.tasks.miniwob:make_miniwob_env")
register("miniwob/*", "devicerl.tasks.miniwob:make_miniwob_env")
register("android", "devicerl.envs.android.env:AndroidEnv")

__all__ = ["DeviceEnv", "EnvSpec", "TaskStatus", "make", "register", "registered"]
