"""Android phones and emulators over ADB: `AndroidEnv` (``make("android", serial=...)``).

Needs the ``android`` extra (adbutils). `devicerl.testing.fake_adb` is a loopback adb
server with recorded screens, for tests and dry runs without a device.
"""

from devicerl.envs.android.env import AndroidEnv

__all__ = ["AndroidEnv"]
