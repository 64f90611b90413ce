"""AndroidWorld's tasks on our ADB device: `AndroidWorldEnv` (``make("androidworld", ...)``),
with its server's client (`devicerl.envs.androidworld.client`).

Needs the ``android`` extra (adbutils) and a running AndroidWorld server beside the emulator.
`devicerl.testing.androidworld_server` stands in for the server in tests.
"""

from devicerl.envs.androidworld.env import AndroidWorldEnv

__all__ = ["AndroidWorldEnv"]
