"""`BrowserEnv`: a `DeviceEnv` that drives real headless Chromium through Playwright.

One device = one browser context with one page, driven through the process's `BrowserHub`
(one Playwright driver on its own event loop; devices may live in any thread). A step is one
hop to the hub and at most three round trips to the browser: the input (one Playwright call:
click, keyboard or drag), one CDP ``Runtime.evaluate`` that returns the task's status and all
visible elements together, and one CDP ``Page.captureScreenshot`` (JPEG by default, decoded
with Pillow in the caller's thread; skip it with ``screenshot=False``). A dead browser raises
`DeviceCrashed`; a step past its deadline raises `DeviceTimeout` (the stuck page is closed, so
other devices sharing the browser carry on).

Actions: tap -> mouse click (touch tap on the ``phone`` viewport) at the pixel; swipe -> mouse
drag, or a scroll of the same displacement (``swipe="scroll"``, the default on ``phone``);
type -> keyboard typing into the focused element; enter -> the Enter key; back -> history back;
home -> the task's start page (back and home are no-ops on suites whose tasks live on one page,
such as MiniWoB++: ``info["noop"]`` says so); long press -> the mouse button (a finger on
``phone``) held down for its duration (`devicerl.envs.browser.gestures`); wait -> nothing for
its duration, then the usual settle; answer -> recorded, and the page reads it as
``window.__drl.answer`` (a task's status script can check it); open app -> an invalid action (a
browser has no apps); complete / impossible end the episode.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import io
import json
import logging
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import numpy as np
from PIL import Image

from devicerl.actions import Action, ActionType
from devicerl.envs.base import DeviceEnv, TaskStatus, performed
from devicerl.envs.browser.dom import CHECK_MARK, DOM_SCRIPT, observe_expression, parse_elements
from devicerl.envs.browser.gestures import hold
from devicerl.envs.browser.hub import BrowserHub
from devicerl.envs.browser.network import NetworkGuard
from devicerl.envs.browser.options import VIEWPORTS, BrowserOptions, viewport_size
from devicerl.envs.browser.pickers import PICKER_SCRIPT, picker_reset_js
from devicerl.envs.browser.touch_scroll import TOUCH_SCROLL_SCRIPT
from devicerl.envs.browser.websuite import PageSetup, WebSuite, make_web_suite
from devicerl.errors import ConfigError, DeviceCrashed, DeviceError, DeviceTimeout, TaskError
from devicerl.records import Observation, Task

log = logging.getLogger(__name__)
T = TypeVar("T")

#: With ``settle_ms``, how often a step looks again whether the page's animations have ended.
SETTLE_GAP_MS = 20
#: The longest a task's page-side check (with the element scan) may run per observation, or
#: half the step timeout when that is shorter: past it the page's script is stopped.
CHECK_TIMEOUT_S = 5.0

#: Resolves after the next rendered frame (style and layout done).
_NEXT_FRAME = "new Promise(r => requestAnimationFrame(() => setTimeout(() => r(true), 0)))"


class BrowserEnv(DeviceEnv):
    """A real Chromium page as a device (see module doc for actions and costs), configured by
    its `BrowserOptions` (each option's help there)."""

    name = "browser"
    unsupported = {ActionType.OPEN_APP: "open_app is not an action of a browser: it has no apps"}

    def __init__(self, task: Task | str | None = None, options: BrowserOptions | None = None):
        super().__init__(task)
        o = self.options = options if options is not None else BrowserOptions()
        self.viewport = viewport_size(o.viewport)
        self.screenshot = o.screenshot
        self.image_format, self.jpeg_quality = o.image_format, o.jpeg_quality
        self.allow_hosts = tuple(o.allow_hosts)
        self.step_timeout_s, self.reset_timeout_s = o.step_timeout_s, o.reset_timeout_s
        self.settle_ms, self.max_elements, self.max_steps = o.settle_ms, o.max_elements, o.max_steps
        self.swipe, self.phone_controls = o.swipe, o.phone_controls
        self._context: Any = None
        self._page: Any = None
        self._cdp: Any = None
        self._touch = False
        self._viewport_now: tuple[int, int] | None = None
        self._guard: NetworkGuard | None = None
        self._suites: dict[str, WebSuite] = {}
        self._setup: PageSetup | None = None
        self._loaded_url: str | None = None
        self._episodes = 0
        self._instruction = ""
        self._extras: dict[str, Any] = {}
        self._oracle: Any = None
        self._screen = (0, 0, 1, 1)
        self._observe_js = ""
        self._broken: str | None = None
        self._navigating = False  # a main-frame navigation started and has not loaded yet
        self._inflight = 0  # requests of the page not finished yet
        self._loaded: asyncio.Event | None = None
        launch = {
            "executable": o.executable,
            "extra_args": tuple(o.browser_args),
            "fast_frames": o.fast_frames,
            "temp_dir": o.temp_dir,
        }
        self._hub = BrowserHub.acquire()
        try:
            self._chromium, self._browser = self._hub.run(
                self._hub.connect(o.share_browser, launch), self.reset_timeout_s
            )
        except BaseException as e:
            self._closed = True
            self._hub.release()
            if isinstance(e, (ConfigError, DeviceError)):
                raise
            raise DeviceCrashed(f"{self.name}: cannot start Chromium: {e}") from e

    # -- public ------------------------------------------------------------------------------
    @property
    def browser_pid(self) -> int:
        """Pid of the Chromium this device runs in (shared with the process's other devices
        when ``share_browser``)."""
        return self._chromium.pid

    def process_ids(self) -> list[int]:
        """Pids this device runs on: its Chromium tree and the process's Playwright driver."""
        pids = self._chromium.process_ids()
        return [*pids, self._hub.driver_pid] if self._hub.driver_pid else pids

    def oracle(self) -> Any:
        return self._oracle

    @property
    def screen_size(self) -> tuple[int, int]:
        """(width, height) of observations; before the first reset, the default task's."""
        if self._setup is None and self.default_task is not None:
            task = self.resolve_task(self.default_task)
            setup = self._suite_for(task).page(task)
            if setup.screen is not None:
                return (setup.screen[2], setup.screen[3])
            return (self.viewport or setup.viewport or VIEWPORTS["desktop"])[:2]
        if self._setup is None:
            return (self.viewport or VIEWPORTS["desktop"])[:2]
        return (self._screen[2], self._screen[3])

    def resolve_task(self, task: Task | str | None) -> Task:
        resolved = super().resolve_task(task)
        return resolved.with_max_steps(self.max_steps) if self.max_steps else resolved

    # -- DeviceEnv hooks ---------------------------------------------------------------------
    def _reset(self, task: Task, seed: int) -> Observation:
        suite = self._suite_for(task)
        setup = suite.page(task)
        value, shot = self._call(
            "reset", self._reset_async(suite, task, seed, setup), self.reset_timeout_s
        )
        return self._build(value, shot)[0]

    def _step(self, action: Action) -> tuple[Observation, TaskStatus]:
        """One action, then status + elements in one evaluation, then the screenshot."""
        before = self._guard.blocked if self._guard else 0
        deadline = self.step_timeout_s + (action.duration_s or 0.0)  # a wait or press lasts
        step = self._step_async(action, self.answer)
        value, shot, noop = self._call("step", step, deadline)
        obs, status = self._build(value, shot)
        if noop:
            status.info["noop"] = noop
        self._add_network_info(status, before)
        return obs, status

    def _close(self) -> None:
        if self._hub.alive:
            if self._context is not None and self._broken is None:
                with contextlib.suppress(Exception):
                    self._hub.run(self._context.close(), 10)
            with contextlib.suppress(Exception):
                self._hub.run(self._hub.disconnect(self._chromium, self._browser), 20)
        for suite in self._suites.values():
            with contextlib.suppress(Exception):
                suite.close()
        if not self._hub.alive:  # interpreter shutdown: no loop to ask, just clean up
            self._chromium.kill()
        self._hub.release()

    # -- on the hub's loop ---------------------------------------------------------------------
    async def _reset_async(
        self, suite: WebSuite, task: Task, seed: int, setup: PageSetup
    ) -> tuple[Any, str | None]:
        await self._prepare_context(setup)
        assert self._guard is not None
        self._guard.reset()  # counts are per episode, the page load included
        if self._loaded_url != setup.url or suite.reload_before_reset(task, self._episodes):
            await self._page.goto(setup.url, wait_until="load", timeout=self._ms(reset=True))
            # Web fonts load after "load": wait, so the first episode lays out like the rest.
            await self._evaluate("document.fonts.ready.then(() => true)", await_promise=True)
            self._loaded_url = setup.url
        await self._page.mouse.move(-1, -1)  # where the last tap left it, it would hover
        self._episodes += 1
        opts = {"clip": list(self._screen), "skip": list(setup.skip_ids), "max": self.max_elements}
        self._observe_js = observe_expression(json.dumps(opts), suite.status_script(task))
        # A reused page keeps its focus and selection across episodes; drop them first, so an
        # episode starts as on a freshly loaded page (the task may then focus what it wants).
        expr = (
            "(async () => { document.activeElement?.blur(); "
            "window.getSelection()?.removeAllRanges(); "
            f"const r = await ({suite.reset_script(task, seed)}); "
            f"window.__drl.resetIds(); window.__drl.answer = null; "
            f"{picker_reset_js(self._screen)} return r; }})()"
        )
        reset_value = await self._evaluate(expr, await_promise=True)
        self._instruction, self._extras = suite.on_reset(task, reset_value)
        self._oracle = suite.oracle(task, reset_value)
        await self._settle_resources()
        return await self._observe_async()

    async def _settle_resources(self, cap_s: float = 2.0) -> None:
        """Let the new episode's resources (images named by CSS, fonts) arrive before the first
        observation, so it does not depend on how warm the cache is."""
        await self._evaluate(_NEXT_FRAME, await_promise=True)  # style+layout issue the requests
        deadline = time.monotonic() + cap_s
        if self._inflight > 0:
            while self._inflight > 0 and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
            await self._evaluate(_NEXT_FRAME, await_promise=True)

    async def _step_async(
        self, action: Action, answer: str | None
    ) -> tuple[Any, str | None, str | None]:
        noop = None
        if performed(action):
            noop = await self._act_async(action)
            if noop is None and self.settle_ms > 0:
                settle = f"window.__drl.settle({self.settle_ms}, {SETTLE_GAP_MS})"
                await self._evaluate(settle, await_promise=True)
        value, shot = await self._observe_async(answer)
        return value, shot, noop

    async def _observe_async(self, answer: str | None = None) -> tuple[Any, str | None]:
        expr = self._observe_js
        if answer is not None:  # given to the page in the same call: a navigation forgets it
            expr = f"(window.__drl.answer = {json.dumps(answer)}, {expr})"
        limit = min(CHECK_TIMEOUT_S, self.step_timeout_s / 2)
        value = await self._evaluate(expr, limit_s=limit)
        if self._navigating or value.get("ready") != "complete":
            await self._wait_for_load()  # an action started a navigation: observe the new page
            value = await self._evaluate(expr, limit_s=limit)
        shot = await self._capture() if self.screenshot else None
        return value, shot

    async def _wait_for_load(self) -> None:
        assert self._loaded is not None
        with contextlib.suppress(asyncio.TimeoutError):
            if self._navigating:
                await asyncio.wait_for(self._loaded.wait(), self.step_timeout_s / 2)
            await self._page.wait_for_load_state("load", timeout=self._ms() / 2)

    def _on_request_done(self, _: Any) -> None:
        self._inflight = max(0, self._inflight - 1)

    def _on_request(self, request: Any) -> None:
        self._inflight += 1
        try:
            main = request.is_navigation_request() and request.frame == self._page.main_frame
        except Exception:  # requests of workers have no frame
            main = False
        if main:
            self._navigating = True
            assert self._loaded is not None
            self._loaded.clear()

    def _on_load(self, _: Any) -> None:
        self._navigating = False
        assert self._loaded is not None
        self._loaded.set()

    async def _act_async(self, action: Action) -> str | None:
        """Perform the action; returns why it was a no-op, if it was one."""
        page = self._page
        x0, y0, w, h = self._screen
        if action.type is ActionType.DUAL_POINT:
            assert action.touch is not None and action.lift is not None
            tx, ty = x0 + action.touch[0] * w, y0 + action.touch[1] * h
            if action.is_tap:
                await (page.touchscreen.tap(tx, ty) if self._touch else page.mouse.click(tx, ty))
                return None
            lx, ly = x0 + action.lift[0] * w, y0 + action.lift[1] * h
            mode = self.swipe if self.swipe != "auto" else ("scroll" if self._touch else "drag")
            await page.mouse.move(tx, ty)
            if mode == "scroll":  # the content follows the finger: scroll the other way
                await page.mouse.wheel(tx - lx, ty - ly)
                await self._evaluate(_NEXT_FRAME, await_promise=True)  # let the scroll land
            else:
                await page.mouse.down()
                await page.mouse.move(lx, ly, steps=8)
                await page.mouse.up()
        elif action.type is ActionType.TYPE:
            if self.phone_controls and not await self._evaluate("window.__drl.editableFocused()"):
                return "type does nothing: no text field is focused (a phone shows no keyboard)"
            await page.keyboard.type(action.text)
        elif action.type is ActionType.LONG_PRESS:
            assert action.touch is not None and action.duration_s is not None
            tx, ty = x0 + action.touch[0] * w, y0 + action.touch[1] * h
            await hold(page, self._cdp, self._touch, tx, ty, action.duration_s)
        elif action.type is ActionType.WAIT:
            await asyncio.sleep(action.duration_s or 0.0)
        elif action.type is ActionType.PRESS_ENTER:
            await page.keyboard.press("Enter")
        elif action.type in (ActionType.PRESS_BACK, ActionType.PRESS_HOME):
            return await self._navigate(action.type)
        return None

    async def _navigate(self, kind: ActionType) -> str | None:
        assert self.task is not None and self._setup is not None
        if not self._suites[self.task.suite].allow_navigation:
            return f"{kind.value} does nothing on {self.task.suite} tasks"
        # "commit": a page restored from the back-forward cache fires no load event; the
        # observation that follows waits for the document to be ready.
        if kind is ActionType.PRESS_BACK:
            await self._page.go_back(wait_until="commit", timeout=self._ms())
        else:
            await self._page.goto(self._setup.url, wait_until="commit", timeout=self._ms())
        return None

    async def _prepare_context(self, setup: PageSetup) -> None:
        """Create the context and page (once), then fit the viewport and the allow-list."""
        vw, vh, touch = self.viewport or (*(setup.viewport or VIEWPORTS["desktop"][:2]), False)
        if self._context is None:
            self._context = await self._browser.new_context(
                viewport={"width": vw, "height": vh},
                is_mobile=touch,
                has_touch=touch,
                service_workers="block",
            )
            await self._context.add_init_script(DOM_SCRIPT)
            if self.phone_controls:
                await self._context.add_init_script(PICKER_SCRIPT)
                await self._context.add_init_script(TOUCH_SCROLL_SCRIPT)
            self._page = await self._context.new_page()
            self._loaded = asyncio.Event()
            self._page.on("request", self._on_request)
            self._page.on("requestfinished", self._on_request_done)
            self._page.on("requestfailed", self._on_request_done)
            self._page.on("load", self._on_load)
            self._cdp = await self._context.new_cdp_session(self._page)
            self._touch = touch
            self._viewport_now = (vw, vh)
        elif self._viewport_now != (vw, vh):
            await self._page.set_viewport_size({"width": vw, "height": vh})
            self._viewport_now = (vw, vh)
        hosts = (*setup.allow_hosts, *self.allow_hosts)
        wanted = (sorted(set(hosts)), setup.allow_files)
        if self._guard is None or (self._guard.allow_hosts, self._guard.allow_files) != wanted:
            if self._guard is not None:
                await self._context.unroute_all()
            self._guard = NetworkGuard(hosts, allow_files=setup.allow_files)
            await self._guard.install(self._context)
        self._setup = setup
        self._screen = setup.screen or (0, 0, vw, vh)

    async def _evaluate(
        self, expression: str, await_promise: bool = False, limit_s: float | None = None
    ) -> Any:
        """One CDP Runtime.evaluate (cheaper than page.evaluate), retried when a navigation
        replaced the document under it; with ``limit_s``, the page's script is stopped after
        that long (a task's check that never returns is a `TaskError` naming it)."""
        params = {"expression": expression, "returnByValue": True, "awaitPromise": await_promise}
        if limit_s is not None:
            params["timeout"] = round(limit_s * 1000)
        for attempt in range(3):
            try:
                reply = await self._cdp.send("Runtime.evaluate", params)
            except Exception as e:
                if limit_s is not None and "Execution was terminated" in str(e):
                    raise await self._stopped(limit_s) from None
                if attempt < 2 and "context" in str(e).lower() and self._chromium.alive():
                    await self._page.wait_for_load_state("load", timeout=self._ms())
                    continue
                raise
            details = reply.get("exceptionDetails")
            if details is None:
                return reply["result"].get("value")
            text = str(details.get("exception", {}).get("description") or details.get("text"))
            if attempt == 0 and "__drl" in text:  # a document that missed the init script
                await self._cdp.send("Runtime.evaluate", {"expression": DOM_SCRIPT})
                continue
            raise DeviceError(f"{self.name}: page script failed: {text.splitlines()[0]}")
        raise DeviceError(f"{self.name}: the page kept navigating away during evaluation")

    async def _stopped(self, limit_s: float) -> DeviceError | TaskError:
        """The error for an observation the page's script did not finish within ``limit_s``:
        the task's check that was running, or the page itself."""
        which = await self._evaluate(f"{CHECK_MARK} || ''")
        if not which or self.task is None:
            return DeviceError(f"{self.name}: the page's script ran past {limit_s:g} s: stopped")
        source = str(self.task.params.get(which) or self.task.params.get("success_js") or "")
        shown = f" ({source[:60]}{'...' if len(source) > 60 else ''})" if source else ""
        return TaskError(
            f"task {self.task.name}: its {which} check{shown} did not return within "
            f"{limit_s:g} s and was stopped"
        )

    async def _capture(self) -> str:
        x, y, w, h = self._screen
        params: dict[str, Any] = {
            "format": self.image_format,
            "clip": {"x": x, "y": y, "width": w, "height": h, "scale": 1},
            "optimizeForSpeed": True,
        }
        if self.image_format == "jpeg":
            params["quality"] = self.jpeg_quality
        return (await self._cdp.send("Page.captureScreenshot", params))["data"]

    # -- in the caller's thread ----------------------------------------------------------------
    def _build(self, value: Any, shot: str | None) -> tuple[Observation, TaskStatus]:
        """Observation and status from one evaluation (the image is decoded here, not on the
        hub's loop, so other devices are not held up)."""
        assert self.task is not None
        status = self._suites[self.task.suite].on_status(self.task, value["status"])
        image = None
        if shot is not None:
            with Image.open(io.BytesIO(base64.b64decode(shot))) as img:
                image = np.asarray(img.convert("RGB"))
        extras = dict(self._extras)
        extras["url"] = value["url"]
        obs = Observation(
            instruction=self._instruction,
            screen_size=self.screen_size,
            screenshot=image,
            elements=parse_elements(value["els"]),
            extras=extras,
        )
        return obs, status

    def _suite_for(self, task: Task) -> WebSuite:
        suite = self._suites.get(task.suite)
        if suite is None:
            suite = self._suites[task.suite] = make_web_suite(task, self.options)
        return suite

    def _add_network_info(self, status: TaskStatus, before: int) -> None:
        if self._guard is None:
            return
        total, hosts = self._guard.snapshot()
        status.info["blocked_requests"] = total - before
        status.info["blocked_requests_total"] = total
        if hosts:
            status.info["blocked_hosts"] = hosts

    def _ms(self, reset: bool = False) -> float:
        return 1000 * (self.reset_timeout_s if reset else self.step_timeout_s)

    def _call(self, what: str, coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
        """Run a coroutine on the hub under a deadline; browser failures become typed errors."""
        if self._broken is not None:
            coro.close()
            raise DeviceCrashed(f"{self.name}: unusable ({self._broken}); restart the device")
        try:
            return self._hub.run(coro, timeout_s)
        except concurrent.futures.TimeoutError:
            self._give_up(f"{what} took longer than {timeout_s:g} s")
            raise DeviceTimeout(f"{self.name}: {self._broken}; its page was closed") from None
        except (DeviceError, ConfigError, TaskError):
            raise
        except Exception as e:
            raise self._typed_error(what, e) from e

    def _give_up(self, why: str) -> None:
        """After a hang: close the page (the browser kills its renderer) so it stops using
        CPU; if even that hangs, kill the device's Chromium when it is private."""
        self._broken = why
        log.warning("%s: %s; closing its page", self.name, why)
        try:
            self._hub.run(self._context.close(), 5)
        except Exception:
            if self._chromium not in self._hub.shared_processes():
                self._chromium.kill()

    def _typed_error(self, what: str, e: Exception) -> DeviceError:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if type(e).__name__ == "TimeoutError":
            return DeviceTimeout(f"{self.name}: {what} timed out: {msg}")
        if not self._chromium.alive() or not self._browser.is_connected() or "closed" in msg:
            self._broken = f"Chromium pid {self.browser_pid} died during {what}"
            return DeviceCrashed(f"{self.name}: {self._broken}: {msg}")
        return DeviceError(f"{self.name}: {what} failed: {msg}")
