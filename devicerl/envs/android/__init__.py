"""Android phones and emulators over ADB: `AndroidEnv` (``make("android", serial=...)``).

Needs the ``android`` extra (adbutils), imported when `AndroidEnv` is first asked for, so its
options (`AndroidOptions`) load light. `devicerl.testing.fake_adb` is a loopback adb server
with recorded screens, for tests and dry runs without a device.
"""

from typing import Any

from devicerl.envs.android.options import AndroidOptions


def __getattr__(name: str) -> Any:
    if name == "AndroidEnv":
        from devicerl.envs.android.env import AndroidEnv

        return AndroidEnv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["AndroidEnv", "AndroidOptions"]
