"""Find and launch headless Chromium, and leave nothing behind.

We start Chromium ourselves (not through Playwright's ``launch``) so that we own its process
group, its profile folder and its temp folder: `ChromiumProcess.kill` removes all three, an
``atexit`` hook does the same for processes still running when Python exits, Linux's
parent-death signal kills Chromium if our process dies hard, and `sweep_stale_profiles` removes
folders left by processes that died before they could clean up. Chromium's own temp files
(``org.chromium.Chromium.*``) go into the profile folder because we point ``TMPDIR`` there.

Playwright then connects over CDP (``connect_over_cdp``, see `devicerl.envs.browser.hub`).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from devicerl.errors import ConfigError, DeviceCrashed

log = logging.getLogger(__name__)

#: Flags that keep Chromium quiet and lean on a closed network.
QUIET_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-breakpad",
    "--disable-crash-reporter",
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-dev-shm-usage",
    "--mute-audio",
    "--hide-scrollbars",
    "--disable-smooth-scrolling",  # a scroll lands at once, not over several frames
    "--password-store=basic",
    "--use-mock-keychain",
    "--metrics-recording-only",
    # Pages must run their timers at full speed although no window is visible (MiniWoB's
    # time limit and animations are timers), as Playwright's own launch arranges.
    "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows",
    "--disable-renderer-backgrounding",
    "--disable-ipc-flooding-protection",
    "--disable-hang-monitor",
    "--disable-popup-blocking",
    "--disable-prompt-on-repost",
    "--disable-client-side-phishing-detection",
    "--disable-component-extensions-with-background-pages",
    "--disable-back-forward-cache",
    "--disable-search-engine-choice-screen",
    "--no-service-autorun",
    "--force-color-profile=srgb",
    "--disable-features=Translate,OptimizationHints,MediaRouter,InterestFeedContentSuggestions",
)

#: Flags that make screenshots return as soon as a frame is ready instead of waiting for the
#: next 30 Hz tick (``benchmarks/browser_throughput.py --systems capture`` measures both).
FAST_FRAME_FLAGS = ("--disable-frame-rate-limit", "--disable-gpu-vsync")

#: Prefix of our profile folders: ``devicerl-chromium-<pid>-<random>``.
PROFILE_PREFIX = "devicerl-chromium-"
#: Chromium puts Unix sockets in its temp folder (paths are limited to 108 bytes): a longer
#: temp folder path goes to the system temp folder instead.
_MAX_TMPDIR_LEN = 60

_LIVE: weakref.WeakSet[ChromiumProcess] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()


def find_chromium(executable: str | None = None) -> str:
    """Path of the Chromium to run.

    Order: ``executable``, ``$DEVICERL_CHROMIUM``, ``chromium``/``chromium-browser``/
    ``google-chrome`` on PATH, then Playwright's managed browser when one is installed.
    """
    for candidate in (executable, os.environ.get("DEVICERL_CHROMIUM")):
        if candidate:
            path = shutil.which(candidate) or (candidate if os.path.isfile(candidate) else None)
            if path is None:
                raise ConfigError(f"browser executable {candidate!r} not found")
            return path
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    managed = _playwright_managed_chromium()
    if managed:
        return managed
    raise ConfigError(
        "no Chromium found: install it (Debian: apt-get install chromium; `make setup` does it "
        "as root) or run `playwright install chromium`, or set DEVICERL_CHROMIUM"
    )


def _playwright_managed_chromium() -> str | None:
    """Playwright's own Chromium, if ``playwright install chromium`` was run."""
    try:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            path = p.chromium.executable_path
    except Exception:  # no playwright, or it cannot start here
        return None
    return path if path and os.path.isfile(path) else None


def _load_prctl():  # resolved before forking: the child must not load libraries
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl()
_SPAWNER: ThreadPoolExecutor | None = None
_SPAWNER_LOCK = threading.Lock()


def _die_with_parent() -> None:
    """In the child before exec: own process group; SIGKILL when the spawning thread dies."""
    os.setsid()
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _spawn(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    """Start Chromium from one long-lived thread.

    Linux sends the parent-death signal when the *thread* that forked exits, so forking from a
    short-lived worker thread would kill a Chromium that other threads still use.
    """
    global _SPAWNER
    with _SPAWNER_LOCK:
        if _SPAWNER is None:
            _SPAWNER = ThreadPoolExecutor(1, thread_name_prefix="devicerl-chromium-spawner")
    popen = partial(
        subprocess.Popen,
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        preexec_fn=_die_with_parent,
    )
    return _SPAWNER.submit(popen).result()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_tree(path: Path, attempts: int = 20) -> None:
    """`rmtree` that retries while dying Chromium helpers still write files into `path`."""
    for _ in range(attempts):
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            return
        time.sleep(0.05)


def sweep_stale_profiles(base: str | os.PathLike[str] | None = None) -> int:
    """Remove profile folders whose owning process is gone; returns how many were removed."""
    root = Path(base or tempfile.gettempdir())
    removed = 0
    with contextlib.suppress(OSError):
        for entry in root.glob(f"{PROFILE_PREFIX}*"):
            try:
                owner = int(entry.name[len(PROFILE_PREFIX) :].split("-", 1)[0])
            except ValueError:
                continue
            if owner != os.getpid() and not _pid_alive(owner):
                _remove_tree(entry)
                removed += 1
    return removed


class ChromiumProcess:
    """One headless Chromium with a private profile; `kill` removes every trace of it."""

    def __init__(
        self,
        executable: str | None = None,
        extra_args: tuple[str, ...] | list[str] = (),
        fast_frames: bool = True,
        temp_dir: str | None = None,
        start_timeout_s: float = 30.0,
    ) -> None:
        self.owner_pid = os.getpid()
        self.executable = find_chromium(executable)
        self.temp_dir = temp_dir or os.environ.get("DEVICERL_TMPDIR") or tempfile.gettempdir()
        sweep_stale_profiles(self.temp_dir)
        self.profile = Path(
            tempfile.mkdtemp(prefix=f"{PROFILE_PREFIX}{os.getpid()}-", dir=self.temp_dir)
        )
        self.tmp = self.profile / "tmp"
        if len(str(self.tmp)) > _MAX_TMPDIR_LEN:  # socket paths in it would be too long
            self.tmp = Path(tempfile.mkdtemp(prefix=f"{PROFILE_PREFIX}{os.getpid()}-"))
        else:
            self.tmp.mkdir()
        args = [
            self.executable,
            *QUIET_FLAGS,
            *(FAST_FRAME_FLAGS if fast_frames else ()),
            *extra_args,
            "--remote-debugging-port=0",
            f"--user-data-dir={self.profile / 'data'}",
            "about:blank",
        ]
        env = {**os.environ, "TMPDIR": str(self.tmp)}
        self._lock = threading.Lock()
        try:
            self.proc = _spawn(args, env)
        except OSError as e:
            shutil.rmtree(self.profile, ignore_errors=True)
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise DeviceCrashed(f"cannot start {self.executable}: {e}") from None
        with _LIVE_LOCK:
            _LIVE.add(self)
        self.ws_endpoint = self._wait_for_endpoint(start_timeout_s)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _wait_for_endpoint(self, timeout_s: float) -> str:
        port_file = self.profile / "data" / "DevToolsActivePort"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive():
                code = self.proc.returncode
                self.kill()
                raise DeviceCrashed(f"Chromium ({self.executable}) exited at start (code {code})")
            with contextlib.suppress(OSError):
                lines = port_file.read_text().split()
                if len(lines) >= 2:
                    return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
            time.sleep(0.01)
        self.kill()
        raise DeviceCrashed(f"Chromium did not open its debugging port within {timeout_s:.0f} s")

    def kill(self) -> None:
        """Kill Chromium and all its children, then remove the profile and temp folders."""
        if os.getpid() != self.owner_pid:  # a forked child's copy: the parent's to clean up
            return
        with self._lock:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
            self._wait_group_gone()
            shutil.rmtree(self.profile, ignore_errors=True)
            shutil.rmtree(self.tmp, ignore_errors=True)
        with _LIVE_LOCK:
            _LIVE.discard(self)

    def _group_alive(self) -> bool:
        """Whether any non-zombie process of Chromium's process group is left."""
        import psutil

        pgid = self.proc.pid
        for p in psutil.process_iter(["status"]):
            with contextlib.suppress(psutil.Error, OSError):
                if p.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(p.pid) == pgid:
                    return True
        return False

    def _wait_group_gone(self, timeout_s: float = 5.0) -> None:
        """Children (renderers, zygotes) die a moment after the group is killed."""
        deadline = time.monotonic() + timeout_s
        while self._group_alive() and time.monotonic() < deadline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            time.sleep(0.01)

    def process_ids(self) -> list[int]:
        """Pids of Chromium and its children (for memory accounting and tests)."""
        import psutil

        try:
            root = psutil.Process(self.proc.pid)
            return [root.pid, *(c.pid for c in root.children(recursive=True))]
        except psutil.Error:
            return []

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            if self.alive() or self.profile.exists():
                self.kill()


def _after_fork_in_child() -> None:
    """A forked child owns none of its parent's Chromiums and has no spawner thread."""
    global _SPAWNER, _SPAWNER_LOCK, _LIVE_LOCK
    _SPAWNER, _SPAWNER_LOCK, _LIVE_LOCK = None, threading.Lock(), threading.Lock()
    _LIVE.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _kill_all() -> None:
    with _LIVE_LOCK:
        live = list(_LIVE)
    for proc in live:
        with contextlib.suppress(Exception):
            proc.kill()
