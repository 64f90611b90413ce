"""`AndroidEnv`: a real Android phone or emulator driven over ADB (``make("android", ...)``).

Episodes follow AitW (Android in the Wild): the instruction comes from the task (an
instruction list), the agent acts with taps, swipes, typing and keys, and the device cannot
tell whether the task was solved (``_status`` never reports success): a judge labels success
afterwards (``judge.kind: vlm`` in a run config, see `devicerl.judges`).

Reset: connect (or reconnect after a failure), optionally load an emulator snapshot and
force-stop listed apps, press HOME, wait ``reset_settle_s``, observe. Step: run the action's
``input`` command, wait ``step_settle_s`` for the UI to settle, observe. A long press is a held
``input swipe``; a wait sleeps its duration instead of the settle time; OPEN_APP starts the
launcher activity its name resolves to among the apps the phone lists
(`devicerl.envs.android.apps`, read once per connection), and a name that matches none is an
invalid action whose reason lists the apps; an answer is recorded, nothing is sent.

An observation is a ``screencap`` (PNG or raw frame, through ``adb exec-out``) and, when
``ui_elements`` is on, a ``uiautomator dump`` parsed into `UIElement`s (1-3 s on real devices,
so off by default).

Failures: a command with no answer within ``command_timeout_s`` raises `DeviceTimeout`; an
unreachable adb server, a device that is gone, offline or returns garbage raises
`DeviceCrashed`. Either drops the connection; the next reset reconnects (pool workers are
restarted by the pool instead).
"""

from __future__ import annotations

import re
import time
from typing import Any

import numpy as np

from devicerl.actions import Action, ActionType
from devicerl.envs.android.adb import (
    AdbClient,
    AdbLink,
    DeviceClaim,
    is_network_serial,
    list_devices,
)
from devicerl.envs.android.apps import LAUNCHER_QUERY, AppCatalog, launch_command
from devicerl.envs.android.console import EmulatorConsole, console_port
from devicerl.envs.android.input import ADB_KEYBOARD_IME, action_commands, untypable_reason
from devicerl.envs.android.options import AndroidOptions
from devicerl.envs.android.screen import decode, downscale, scaled_size
from devicerl.envs.android.uiautomator import hierarchy_rotation, parse_hierarchy
from devicerl.envs.base import DeviceEnv, TaskStatus
from devicerl.errors import ConfigError, DataError, DeviceCrashed, DeviceError, TaskError
from devicerl.records import Observation, Task

#: Where the UI dump is written on the device (then printed with ``cat`` in the same command).
UI_DUMP_PATH = "/data/local/tmp/devicerl_ui.xml"
UI_DUMP = f"uiautomator dump {UI_DUMP_PATH} >/dev/null && cat {UI_DUMP_PATH}"


class AndroidEnv(DeviceEnv):
    """One Android device (phone or emulator) reached through an adb server.

    ``serial`` picks the device; without it the env claims the first free online device of
    the server (among ``serials`` when given), so several envs with the same settings use
    different devices. Claims are lock files in ``lock_dir`` (``claim=False`` disables them).
    Every option: `AndroidOptions`; the module doc says how they are used.
    """

    name = "android"

    def __init__(self, task: Task | str | None = None, options: AndroidOptions | None = None):
        super().__init__(task)
        o = self.options = options if options is not None else AndroidOptions()
        self.serial = o.serial
        self.serials = list(o.serials) if o.serials is not None else None
        self.adb_host, self.adb_port = o.adb_host, o.adb_port
        self.screenshot, self.screenshot_format = o.screenshot, o.screenshot_format
        self.max_side, self.ui_elements = o.max_side, o.ui_elements
        self.force_stop, self.home_on_reset = list(o.force_stop), o.home_on_reset
        self.snapshot = o.snapshot
        self.console = (o.emulator_console_host or o.adb_host, o.emulator_console_port)
        self.console_token = o.emulator_console_token_file
        self.unicode_text, self.swipe_ms = o.unicode_text, o.swipe_ms
        self.step_settle_s, self.reset_settle_s = o.step_settle_s, o.reset_settle_s
        self.command_timeout_s, self.snapshot_timeout_s = o.command_timeout_s, o.snapshot_timeout_s
        self._claim = DeviceClaim(o.lock_dir, o.adb_host, o.adb_port) if o.claim else None
        self._link: AdbLink | None = None
        self._unicode_ime = o.unicode_text == "adbkeyboard"
        self._device_size: tuple[int, int] | None = None  # (w, h) of the device's frames
        self._natural_size: tuple[int, int] | None = None  # `wm size` (screenshot off)
        self._last_input: str | None = None
        self._apps: AppCatalog | None = None  # the phone's launchable apps (per connection)

    # -- connection ---------------------------------------------------------------------------
    def _connect(self) -> AdbLink:
        """The link to the device, (re)connecting and (re)claiming as needed."""
        if self._link is not None:
            return self._link
        serial = self._pick_serial()
        link = AdbLink(self.adb_host, self.adb_port, serial, self.command_timeout_s)
        state = link.state()
        if state != "device" and is_network_serial(serial):
            link.connect_network()
            state = link.state()
        if state != "device":
            raise DeviceCrashed(f"{link.label} is {state}, not ready")
        if self.unicode_text == "auto":
            ime = link.shell("settings get secure default_input_method")
            self._unicode_ime = ADB_KEYBOARD_IME in ime.decode("utf-8", "replace")
        if not self.screenshot:
            self._natural_size = self._device_size = _wm_size(link)
        self._link, self._apps = link, None
        return link

    def _pick_serial(self) -> str:
        label = f"android (adb {self.adb_host}:{self.adb_port})"
        claim = self._claim
        if self.serial is not None:
            if claim is not None and not claim.acquire(self.serial):
                raise DeviceCrashed(
                    f"android {self.serial}: in use by another devicerl env "
                    f"(lock {claim.path(self.serial)})"
                )
            return self.serial
        client = AdbClient(self.adb_host, self.adb_port, self.command_timeout_s)
        online = [s for s, st in list_devices(client, label) if st == "device"]
        wanted = [s for s in online if self.serials is None or s in self.serials]
        if claim is not None and claim.serial in wanted:  # keep our device if it is back
            wanted.remove(claim.serial)
            wanted.insert(0, claim.serial)
        picked = claim.first_free(wanted) if claim is not None else (wanted or [None])[0]
        if picked is None:
            raise DeviceCrashed(
                f"{label}: no free device ({len(online)} online: {', '.join(online) or 'none'}; "
                f"wanted {self.serials or 'any'}; the others are claimed by other envs)"
            )
        return picked

    def _live(self) -> AdbLink:
        if self._link is None:
            raise DeviceCrashed(f"android {self.serial or ''}: not connected (call reset)")
        return self._link

    def _io(self, fn: Any, *args: Any) -> Any:
        """Run a device call; a device failure drops the link (the next reset reconnects)."""
        try:
            return fn(*args)
        except DeviceError:
            self._link = None
            raise

    # -- DeviceEnv hooks ----------------------------------------------------------------------
    def _reset(self, task: Task, seed: int) -> Observation:
        if task.instruction is None:
            raise TaskError(f"android task {task.name} has no instruction (use instruction lists)")
        if task.env not in (None, self.name):
            raise TaskError(f"task {task.name} is for device {task.env!r}, not android")
        link = self._connect()
        if self.snapshot:
            self._io(self._load_snapshot, link.serial)
        commands = [f"am force-stop {p}" for p in self.force_stop]
        if self.home_on_reset:
            commands.append("input keyevent 3")
        if commands:
            self._io(link.shell, " ; ".join(commands))
        time.sleep(self.reset_settle_s)
        return self._observe()

    def _check_action(self, action: Action) -> Action:
        """Text the device cannot type and an app the phone does not have become invalid
        actions (no-ops)."""
        if action.type is ActionType.TYPE and not self._unicode_ime:
            reason = untypable_reason(action.text)
            if reason is not None:
                return Action.invalid(raw=action.text, reason=reason)
        if action.type is ActionType.OPEN_APP:
            component, reason = self._app_catalog().resolve(action.app)
            if component is None:
                return Action.invalid(raw=action.to_json(), reason=reason)
        return super()._check_action(action)

    def _app_catalog(self) -> AppCatalog:
        if self._apps is None:
            out = self._io(self._live().shell, LAUNCHER_QUERY)
            self._apps = AppCatalog.parse(out.decode("utf-8", "replace"))
        return self._apps

    def _step(self, action: Action) -> tuple[Observation, TaskStatus]:
        self._last_input = None
        obs, status = super()._step(action)
        if self._last_input is not None:
            status.info["adb_input"] = self._last_input
        return obs, status

    def _act(self, action: Action) -> None:
        link = self._live()
        if action.type is ActionType.OPEN_APP:
            component, _ = self._app_catalog().resolve(action.app)  # `_check_action` found it
            commands = [launch_command(str(component))]
        else:
            size = self._device_size or self._io(_wm_size, link)
            commands = action_commands(action, size, self.swipe_ms, self._unicode_ime)
        if commands:
            line = " && ".join(commands)
            out = self._io(link.shell, line).decode("utf-8", "replace").strip()
            self._last_input = f"{line}\n{out}" if out else line
        wait = action.duration_s if action.type is ActionType.WAIT else None
        time.sleep(self.step_settle_s if wait is None else wait)

    def _observe(self) -> Observation:
        link = self._live()
        assert self.task is not None
        extras: dict[str, Any] = {"serial": link.serial}
        shot, scale = None, 1.0
        if self.screenshot:
            frame = self._io(self._screencap, link)
            self._device_size = (frame.shape[1], frame.shape[0])
            shot = downscale(frame, self.max_side)
            scale = shot.shape[1] / frame.shape[1]
        assert self._device_size is not None
        elements = []
        if self.ui_elements:
            xml = self._io(link.shell, UI_DUMP)
            if self._natural_size is not None:  # no screenshot: the dump tells the rotation
                w, h = self._natural_size
                self._device_size = (h, w) if hierarchy_rotation(xml) % 2 else (w, h)
            try:
                elements = parse_hierarchy(xml, self._device_size, scale)
            except DataError as e:  # e.g. "could not get idle state": observe without elements
                extras["ui_error"] = f"{e}: {xml[:200]!r}"
        obs_size = (shot.shape[1], shot.shape[0]) if shot is not None else self._device_size
        return Observation(self.task.instruction or "", obs_size, shot, elements, extras=extras)

    def _status(self) -> TaskStatus:
        return TaskStatus()  # AitW has no task-native check: a judge labels success

    def _close(self) -> None:
        self._link = None
        if self._claim is not None:
            self._claim.release()

    @property
    def screen_size(self) -> tuple[int, int]:
        """(width, height) of observations; connects to the device when not yet known."""
        if self._device_size is None:
            link = self._connect()
            self._device_size = self._io(_wm_size, link)
        size = self._device_size
        return scaled_size(size, self.max_side) if self.screenshot else size

    # -- helpers ------------------------------------------------------------------------------
    def _screencap(self, link: AdbLink) -> np.ndarray:
        raw = self.screenshot_format == "raw"
        data = link.exec_out("screencap" if raw else "screencap -p")
        try:
            return decode(data, self.screenshot_format)
        except DataError as e:
            raise DeviceCrashed(f"{link.label}: {e}") from None

    def _load_snapshot(self, serial: str) -> None:
        host, port = self.console
        port = port or console_port(serial)
        if port is None:
            raise ConfigError(
                f"android {serial}: snapshot={self.snapshot!r} needs an emulator (serial "
                "emulator-NNNN) or emulator_console_port"
            )
        with EmulatorConsole(host, port, self.console_token, self.snapshot_timeout_s) as c:
            c.command(f"avd snapshot load {self.snapshot}", what=f"snapshot {self.snapshot!r}")


def _wm_size(link: AdbLink) -> tuple[int, int]:
    """The display size ``wm size`` reports (the override when one is set)."""
    out = link.shell("wm size").decode("utf-8", "replace")
    m = re.search(r"Override size: (\d+)x(\d+)", out) or re.search(r"size: (\d+)x(\d+)", out)
    if not m:
        raise DeviceCrashed(f"{link.label}: unexpected `wm size` output {out[:100]!r}")
    return int(m.group(1)), int(m.group(2))
