"""The options of an Android device (``env.name: android``): types, bounds and help in one
place, read by the config loader."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from devicerl.envs.android.console import DEFAULT_TOKEN_PATH

_PACKAGE = re.compile(r"[A-Za-z][\w]*(\.[A-Za-z_][\w]*)+")
_SNAPSHOT = re.compile(r"[\w.\-]+")
_PORT = {"min": 1, "max": 65535}


@dataclass
class AndroidOptions:
    """One Android phone or emulator reached through an adb server (`AndroidEnv`)."""

    serial: str | None = field(
        default=None, metadata={"help": "the device (null: the first free online one)"}
    )
    serials: tuple[str, ...] | None = field(
        default=None, metadata={"help": "without serial: claim a free device among these"}
    )
    adb_host: str = field(default="127.0.0.1", metadata={"help": "the adb server's host"})
    adb_port: int = field(default=5037, metadata={"help": "the adb server's port", **_PORT})
    screenshot: bool = field(default=True, metadata={"help": "capture the screen"})
    screenshot_format: Literal["png", "raw"] = field(
        default="png", metadata={"help": "screencap as PNG, or raw frames (faster, larger)"}
    )
    max_side: int = field(
        default=0,
        metadata={"help": "downscale screenshots to this longest side (0: as captured)", "min": 0},
    )
    ui_elements: bool = field(
        default=False,
        metadata={"help": "dump the view hierarchy into UI elements (1-3 s a step on phones)"},
    )
    force_stop: tuple[str, ...] = field(
        default=(), metadata={"help": "apps (package names) force-stopped at every reset"}
    )
    home_on_reset: bool = field(default=True, metadata={"help": "press HOME at every reset"})
    snapshot: str | None = field(
        default=None, metadata={"help": "emulator snapshot loaded at every reset (null: none)"}
    )
    emulator_console_host: str | None = field(
        default=None, metadata={"help": "the emulator console's host (null: adb_host)"}
    )
    emulator_console_port: int | None = field(
        default=None,
        metadata={"help": "the emulator console's port (null: from the serial)", **_PORT},
    )
    emulator_console_token_file: str = field(
        default=DEFAULT_TOKEN_PATH, metadata={"help": "the file holding the console's auth token"}
    )
    unicode_text: Literal["auto", "adbkeyboard", "reject"] = field(
        default="auto",
        metadata={
            "help": "text adb cannot type: through ADBKeyboard (auto: when it is the input "
            "method) or rejected as an invalid action"
        },
    )
    swipe_ms: int = field(default=300, metadata={"help": "a swipe's duration", "min": 0})
    step_settle_s: float = field(
        default=1.0, metadata={"help": "wait after an action for the UI to settle", "min": 0}
    )
    reset_settle_s: float = field(
        default=2.0, metadata={"help": "wait after a reset for the UI to settle", "min": 0}
    )
    command_timeout_s: float = field(
        default=30.0, metadata={"help": "an adb command with no answer raises", "gt": 0}
    )
    snapshot_timeout_s: float = field(
        default=120.0, metadata={"help": "how long loading a snapshot may take", "gt": 0}
    )
    claim: bool = field(
        default=True,
        metadata={"help": "claim the device with a lock file, so envs never share one"},
    )
    lock_dir: str | None = field(
        default=None, metadata={"help": "where claim locks live (null: the temp folder)"}
    )

    def __post_init__(self) -> None:
        if not self.screenshot and not self.ui_elements:
            raise ValueError("screenshot and ui_elements are both off; nothing to observe")
        bad = [p for p in self.force_stop if not _PACKAGE.fullmatch(p)]
        if bad:
            raise ValueError(f"force_stop has invalid package names {bad}")
        if self.snapshot is not None and not _SNAPSHOT.fullmatch(self.snapshot):
            raise ValueError(f"invalid snapshot name {self.snapshot!r}")
