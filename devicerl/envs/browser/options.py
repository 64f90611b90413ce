"""The options of a browser device (``env.name: browser``; suites built on it, such as MiniWoB++,
extend them): types, bounds and help in one place, read by the config loader."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

#: Named viewports: (width, height, mobile+touch).
VIEWPORTS: dict[str, tuple[int, int, bool]] = {
    "desktop": (1280, 800, False),
    "phone": (540, 1170, True),
}


def viewport_size(viewport: str | tuple[int, int]) -> tuple[int, int, bool] | None:
    """A viewport option as (width, height, mobile+touch); None for ``"auto"``. Raises
    ValueError naming what is wrong."""
    if viewport == "auto":
        return None
    if isinstance(viewport, str):
        if viewport not in VIEWPORTS:
            names = ", ".join(VIEWPORTS)
            raise ValueError(f"unknown viewport {viewport!r}; use auto, {names} or [width, height]")
        return VIEWPORTS[viewport]
    w, h = (int(v) for v in viewport)
    if w < 16 or h < 16:
        raise ValueError(f"viewport {list(viewport)} is too small (16 x 16 at least)")
    return (w, h, False)


@dataclass
class BrowserOptions:
    """A real Chromium page as a device (`devicerl.envs.browser.BrowserEnv`)."""

    viewport: str | tuple[int, int] = field(
        default="auto",
        metadata={
            "help": "auto (the task's preferred size, else desktop), desktop (1280x800), phone "
            "(540x1170 with touch) or [width, height]"
        },
    )
    screenshot: bool = field(
        default=True, metadata={"help": "capture pixels (false: UI elements only, much cheaper)"}
    )
    image_format: Literal["jpeg", "png"] = field(
        default="jpeg", metadata={"help": "how Chromium encodes the screenshot"}
    )
    jpeg_quality: int = field(default=90, metadata={"help": "JPEG quality", "min": 1, "max": 100})
    share_browser: bool = field(
        default=True,
        metadata={
            "help": "the devices of a process share one Chromium, each in its own context "
            "(false: a private Chromium, so a crash takes only this device down)"
        },
    )
    allow_hosts: tuple[str, ...] = field(
        default=(), metadata={"help": "hosts a page may reach beyond the task's own"}
    )
    step_timeout_s: float = field(
        default=30.0, metadata={"help": "a step taking longer raises DeviceTimeout", "gt": 0}
    )
    reset_timeout_s: float = field(
        default=60.0, metadata={"help": "a reset taking longer raises DeviceTimeout", "gt": 0}
    )
    settle_ms: float = field(
        default=800.0,
        metadata={
            "help": "after an action, wait until the page's animations have ended, at most this "
            "long, so an observation does not catch boxes about to move (0: observe at once)",
            "min": 0,
        },
    )
    max_elements: int = field(
        default=300, metadata={"help": "UI elements kept per observation", "min": 0}
    )
    max_steps: int | None = field(
        default=None, metadata={"help": "step budget of every task (null: each task's)", "min": 1}
    )
    swipe: Literal["auto", "drag", "scroll"] = field(
        default="auto",
        metadata={"help": "a swipe as a mouse drag or a scroll (auto: scroll on touch viewports)"},
    )
    executable: str | None = field(
        default=None, metadata={"help": "the Chromium binary (null: the system's chromium)"}
    )
    browser_args: tuple[str, ...] = field(
        default=(), metadata={"help": "extra Chromium command-line flags"}
    )
    fast_frames: bool = field(
        default=True, metadata={"help": "let Chromium render frames as fast as it can"}
    )
    temp_dir: str | None = field(
        default=None, metadata={"help": "where Chromium's profiles go (null: the system's)"}
    )
    phone_controls: bool = field(
        default=True,
        metadata={
            "help": "behave as a phone's browser where a desktop control is out of reach of "
            "AitW actions: tapped selects open a tappable list, date inputs take typed text, "
            "swipes scroll content, typing without a focused field does nothing (false: "
            "desktop Chromium as is)"
        },
    )
    task_pages: int = field(
        default=0,
        metadata={
            "help": "keep up to N pages open, one per task, so switching tasks does not "
            "navigate (0: one page)",
            "min": 0,
        },
    )

    def __post_init__(self) -> None:
        viewport_size(self.viewport)
