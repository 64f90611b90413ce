"""A device for the foreign-worker tests, run by `devicerl.envs.foreign.remote` in another
environment (it imports nothing from devicerl): a 4 x 6 screen with one button, and typed
commands that crash, hang or raise, as a real device might."""

from __future__ import annotations

import os
import time

import numpy as np


class ConfigError(Exception):
    """Named like the protocol's: the host treats it as fatal."""


class ScriptedDevice:
    def __init__(self, fail_start: str = "") -> None:
        if fail_start == "config":
            raise ConfigError("the server at WA_SHOPPING is not set")
        if fail_start == "import":
            import not_a_package_anywhere  # noqa: F401
        self.seed = 0

    def versions(self) -> dict:
        from importlib.metadata import version

        return {"numpy": np.__version__, "playwright": version("playwright")}

    def _observation(self, pressed: bool = False) -> dict:
        shot = np.full((4, 6, 3), self.seed % 256, dtype=np.uint8)
        button = {"id": "b1", "role": "button", "text": "pressed" if pressed else "OK",
                  "bbox": [2, 1, 4, 3], "clickable": True}  # fmt: skip
        print("this line goes to stderr, not into a frame")
        return {"instruction": f"press OK ({self.task})", "screenshot": shot,
                "elements": [button], "extras": {"pid": os.getpid()}}  # fmt: skip

    def reset(self, task: dict, seed: int) -> dict:
        self.seed, self.task = seed, task["name"]
        return self._observation()

    def step(self, action: dict) -> dict:
        text = action.get("text", "")
        if text == "crash":
            os._exit(3)
        if text == "hang":
            time.sleep(600)
        if text == "raise":
            raise RuntimeError("the page went away")
        pressed = action["type"] == "DUAL_POINT" and action["touch"][0] > 0.3
        status = {"done": pressed, "success": pressed, "raw_reward": float(pressed),
                  "info": {"seen": action}}  # fmt: skip
        return {"observation": self._observation(pressed), "status": status}
