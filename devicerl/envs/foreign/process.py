"""The host side of a foreign device: its process, and messages to and from it.

`ForeignProcess` starts ``PYTHON remote.py`` (`devicerl.envs.foreign.remote`, run by path, so
the other environment needs no devicerl install), builds the device there with a ``start``
message and then exchanges one frame per call. The child stays in the caller's process group
(a pool worker's), so a worker killed by the pool's supervision takes it and whatever it
started (a browser) along; it also exits by itself when its parent dies or closes the pipe.

Failures keep the pool's meaning: the child dying (EOF on its pipe) raises `DeviceCrashed`
with its exit cause and last stderr line; an error the device marks ``ConfigError`` /
``TaskError`` (or a package missing over there) raises ours (fatal: a restart will not fix
it); any other error raises `DeviceError` (the pool truncates the episode and restarts).
A hung child is the pool's step deadline's business, like any other hung device.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import psutil

from devicerl.envs.foreign.remote import ProtocolError, encode, read_frame
from devicerl.errors import ConfigError, DeviceCrashed, DeviceError, TaskError
from devicerl.secrets import scrub

log = logging.getLogger(__name__)

#: The file the other interpreter runs.
REMOTE_FILE = Path(__file__).with_name("remote.py")
#: Variables that would point the other interpreter at this environment's packages.
_HOST_ONLY = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV")
_ERRORS: dict[str, type[Exception]] = {"ConfigError": ConfigError, "TaskError": TaskError}


def _exit_cause(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {-code}, {signal.Signals(-code).name}"
        return f"signal {-code}"
    return f"exit code {code}"


class ForeignProcess:
    """A device hosted by another interpreter (see the module doc). Not thread-safe."""

    def __init__(
        self, python: str, device: str, options: dict[str, Any] | None, label: str
    ) -> None:
        if not (os.path.isfile(python) and os.access(python, os.X_OK)):
            raise ConfigError(f"{label}: python {python!r} is not an executable file")
        self.label = label
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        env = {k: v for k, v in os.environ.items() if k not in _HOST_ONLY}
        self.proc = subprocess.Popen(
            [python, "-u", str(REMOTE_FILE)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            close_fds=True,
        )
        threading.Thread(target=self._drain_stderr, name=f"{label}-stderr", daemon=True).start()
        try:
            answer, _ = self.call({"op": "start", "device": device, "options": options or {}})
        except BaseException:
            self.kill()
            raise
        self.versions: dict[str, str] = dict(answer.get("versions") or {})

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in iter(self.proc.stderr.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                self.stderr_tail.append(line)
                log.debug("%s: %s", self.label, line)

    def call(self, message: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        """Send one message and return the answer (its JSON and its raw bytes)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(encode(message))
            self.proc.stdin.flush()
            answer, blob = read_frame(self.proc.stdout)
        except (EOFError, OSError):
            raise self._died() from None
        except ProtocolError as e:
            self.kill()
            raise DeviceError(f"{self.label} broke the protocol: {e}") from None
        if not answer.get("ok"):
            raise self._failure(answer.get("error") or {})
        return answer, blob

    def _died(self) -> DeviceCrashed:
        try:
            code = self.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        last = f"; last output: {self.stderr_tail[-1]}" if self.stderr_tail else ""
        return DeviceCrashed(scrub(f"{self.label} died ({_exit_cause(code)}){last}"))

    def _failure(self, error: dict[str, Any]) -> Exception:
        kind = str(error.get("type", "Error"))
        message = scrub(f"{self.label}: {error.get('message', '')}")
        tb = str(error.get("traceback", ""))
        if tb:
            log.debug("%s traceback:\n%s", self.label, scrub(tb))
        cls = _ERRORS.get(kind)
        return cls(message) if cls else DeviceError(f"{kind}: {message}")

    def close(self, timeout: float = 5.0) -> None:
        """Ask the device to close, then kill the process if it is still there."""
        if self.proc.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                assert self.proc.stdin is not None
                self.proc.stdin.write(encode({"op": "close"}))
                self.proc.stdin.flush()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout)
        self.kill()

    def kill(self) -> None:
        """Kill the process and everything it started (a browser and its driver)."""
        if self.proc.poll() is None:
            try:
                victims = psutil.Process(self.proc.pid).children(recursive=True)
            except psutil.Error:
                victims = []
            with contextlib.suppress(OSError):
                self.proc.kill()
            for child in victims:
                with contextlib.suppress(psutil.Error):
                    child.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5.0)
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError, ValueError):
                if stream is not None:
                    stream.close()
