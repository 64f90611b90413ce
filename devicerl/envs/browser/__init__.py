"""Browser devices: real headless Chromium driven through Playwright (see `BrowserEnv`)."""

from devicerl.envs.browser.env import BrowserEnv
from devicerl.envs.browser.websuite import (
    VIEWPORTS,
    PageSetup,
    UrlSuite,
    WebSuite,
    register_web_suite,
)

__all__ = ["VIEWPORTS", "BrowserEnv", "PageSetup", "UrlSuite", "WebSuite", "register_web_suite"]
