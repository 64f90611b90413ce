"""Browser devices: real headless Chromium driven through Playwright (see `BrowserEnv`).

`BrowserEnv` is imported when first asked for (it brings Pillow and Playwright's machinery), so
its options and the suite API load light, e.g. for ``devicerl train --help``.
"""

from typing import Any

from devicerl.envs.browser.options import VIEWPORTS, BrowserOptions
from devicerl.envs.browser.websuite import PageSetup, UrlSuite, WebSuite, register_web_suite


def __getattr__(name: str) -> Any:
    if name == "BrowserEnv":
        from devicerl.envs.browser.env import BrowserEnv

        return BrowserEnv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "VIEWPORTS",
    "BrowserEnv",
    "BrowserOptions",
    "PageSetup",
    "UrlSuite",
    "WebSuite",
    "register_web_suite",
]
