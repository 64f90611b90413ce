"""One Playwright driver per process, serving every browser device of the process.

Playwright's async API runs on a private event-loop thread; devices (in any thread) submit
coroutines with `BrowserHub.run`, which waits with a deadline. One driver process serves all
devices (a Playwright driver costs ~50 MiB, so one per device or per thread would double the
memory of a device), devices are not tied to the thread that created them, and a page stuck in
a script loop only times out its own device: the event loop keeps serving the others.

Chromium processes are shared by every device of the process (``shared=True``: one browser
context per device, ~60 MiB each) or owned by one device (``shared=False``: a crash takes only
that device down). Everything is reference counted: when the last device leaves, its Chromium
is killed and the driver stopped.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import os
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from devicerl.envs.browser.launcher import ChromiumProcess

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class _Shared:
    process: ChromiumProcess
    browser: Any
    refs: int = 0


class BrowserHub:
    """The process's event loop, Playwright driver and Chromium processes (use `acquire`)."""

    _instance: BrowserHub | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.refs = 0
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="devicerl-browser-hub", daemon=True
        )
        self._thread.start()
        self.playwright: Any = None
        self.driver_pid: int | None = None
        self._shared: dict[tuple, _Shared] = {}
        self._connect_lock: asyncio.Lock | None = None

    # -- lifetime -----------------------------------------------------------------------------
    @classmethod
    def acquire(cls) -> BrowserHub:
        """The hub of this process (a forked child gets its own), with one more reference."""
        with cls._lock:
            hub = cls._instance
            if hub is None or hub.pid != os.getpid():
                hub = cls._instance = cls()
            hub.refs += 1
            return hub

    def release(self) -> None:
        """Drop a reference; the last one stops the driver and the loop."""
        with BrowserHub._lock:
            self.refs -= 1
            if self.refs > 0 or BrowserHub._instance is not self:
                return
            BrowserHub._instance = None
        if threading.current_thread() is self._thread:  # e.g. a garbage-collected device
            self.loop.call_soon(lambda: self.loop.create_task(self._stop_and_exit()))
            return
        with contextlib.suppress(Exception):
            self.run(self._stop(), timeout_s=15)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)

    def shutdown(self) -> None:
        """Stop now, whatever the references (interpreter exit): devices closed later find
        the hub gone and only clean up their own files."""
        with BrowserHub._lock:
            if BrowserHub._instance is self:
                BrowserHub._instance = None
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            with contextlib.suppress(Exception):
                self.run(self._stop(), timeout_s=5)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5)

    async def _stop_and_exit(self) -> None:
        await self._stop()
        self.loop.stop()

    async def _stop(self) -> None:
        for entry in list(self._shared.values()):
            entry.process.kill()
        self._shared.clear()
        if self.playwright is not None:
            with contextlib.suppress(Exception):
                await self.playwright.stop()
            self.playwright = None

    @property
    def alive(self) -> bool:
        """Whether the loop still runs (it does not during interpreter shutdown)."""
        return self._thread.is_alive() and self.loop.is_running()

    def shared_processes(self) -> list[ChromiumProcess]:
        return [entry.process for entry in self._shared.values()]

    # -- calls ------------------------------------------------------------------------------
    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the hub's loop and wait for it; cancels it on timeout
        (raises `concurrent.futures.TimeoutError`)."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("BrowserHub.run called from the hub's own loop thread")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    # -- on the loop --------------------------------------------------------------------------
    async def _driver(self) -> Any:
        if self.playwright is None:
            import psutil
            from playwright.async_api import async_playwright

            def node_children() -> set[int]:
                return {c.pid for c in psutil.Process().children() if "node" in c.name()}

            before = await asyncio.to_thread(node_children)
            self.playwright = await async_playwright().start()
            new = sorted(await asyncio.to_thread(node_children) - before)
            self.driver_pid = new[0] if len(new) == 1 else None
        return self.playwright

    async def connect(self, shared: bool, launch: dict[str, Any]) -> tuple[ChromiumProcess, Any]:
        """A Chromium (shared or private) and Playwright's connection to it."""
        if self._connect_lock is None:
            self._connect_lock = asyncio.Lock()
        async with self._connect_lock:  # devices starting together must find one shared Chromium
            return await self._connect(shared, launch)

    async def _connect(self, shared: bool, launch: dict[str, Any]) -> tuple[ChromiumProcess, Any]:
        driver = await self._driver()
        key = tuple(sorted(launch.items()))
        if shared:
            entry = self._shared.get(key)
            if entry is not None and not (entry.process.alive() and entry.browser.is_connected()):
                self._shared.pop(key)
                entry.process.kill()
                entry = None
            if entry is None:
                process = await asyncio.to_thread(ChromiumProcess, **launch)
                browser = await self._connect_cdp(driver, process)
                entry = self._shared[key] = _Shared(process, browser)
            entry.refs += 1
            return entry.process, entry.browser
        process = await asyncio.to_thread(ChromiumProcess, **launch)
        return process, await self._connect_cdp(driver, process)

    @staticmethod
    async def _connect_cdp(driver: Any, process: ChromiumProcess) -> Any:
        try:
            return await driver.chromium.connect_over_cdp(process.ws_endpoint)
        except BaseException:
            process.kill()
            raise

    async def disconnect(self, process: ChromiumProcess, browser: Any) -> None:
        """Give back what `connect` returned."""
        for key, entry in list(self._shared.items()):
            if entry.process is process:
                entry.refs -= 1
                if entry.refs > 0:
                    return
                self._shared.pop(key)
                break
        with contextlib.suppress(Exception):
            await asyncio.wait_for(browser.close(), 5)
        await asyncio.to_thread(process.kill)


@atexit.register
def _shutdown_at_exit() -> None:
    hub = BrowserHub._instance
    if hub is not None and hub.pid == os.getpid():
        hub.shutdown()
