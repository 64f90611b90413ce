"""AndroidWorld's tasks on our ADB device: `AndroidWorldEnv` (``make("androidworld", ...)``),
with its server's client (`devicerl.envs.androidworld.client`).

Needs the ``android`` extra (adbutils) and a running AndroidWorld server beside the emulator.
`devicerl.testing.androidworld_server` stands in for the server in tests.
"""

from typing import Any

from devicerl.envs.androidworld.options import AndroidWorldOptions


def __getattr__(name: str) -> Any:  # the device needs adbutils: imported when asked for
    if name == "AndroidWorldEnv":
        from devicerl.envs.androidworld.env import AndroidWorldEnv

        return AndroidWorldEnv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["AndroidWorldEnv", "AndroidWorldOptions"]
