"""The options of an AndroidWorld device (``env.name: androidworld``): the android device's
options (`AndroidOptions`) and the AndroidWorld servers it talks to."""

from __future__ import annotations

from dataclasses import dataclass, field

from devicerl.envs.android.options import AndroidOptions
from devicerl.errors import ConfigError


@dataclass
class AndroidWorldOptions(AndroidOptions):
    """An emulator whose tasks an AndroidWorld server sets up and scores (`AndroidWorldEnv`)."""

    servers: dict[str, str] | None = field(
        default=None,
        metadata={
            "help": "adb serial -> its AndroidWorld server's URL (null: the one server at "
            "$ANDROIDWORLD_URL)"
        },
    )
    server_timeout_s: float = field(
        default=300.0,
        metadata={"help": "a request to the server with no answer raises", "gt": 0},
    )

    def __post_init__(self) -> None:
        if self.snapshot:
            raise ConfigError(
                "androidworld: no snapshot option: AndroidWorld's task initialisation sets the "
                "emulator's state, and a snapshot loaded after it would undo it"
            )
