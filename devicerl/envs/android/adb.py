"""The ADB link of one Android device: commands through adbutils, typed errors, device claims.

`AdbLink` talks to an adb server (``adb_host:adb_port``) with adbutils' smart-socket client,
with three changes to adbutils' defaults that matter on a device fleet:
- it never starts a local adb server when the configured one does not answer (adbutils runs
  ``adb start-server``, which would hide a dead remote server behind a fresh empty one);
- every socket gets the link's timeout (adbutils opens transports with a 10-minute timeout),
  so a device that stops answering raises `DeviceTimeout` instead of blocking a worker;
- the server version is asked once, not before every command (one connection per command).

adbutils and socket failures become `DeviceTimeout` / `DeviceCrashed` naming the device, so
the pool restarts the worker. `DeviceClaim` makes devices exclusive per process: a lock file
per (server, serial) held with ``flock``, released when the env closes or its process dies,
so pool workers with identical settings spread over the free devices of a server.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import socket
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from devicerl.errors import ConfigError, DeviceCrashed, DeviceTimeout

_CHUNK = 1 << 20  # bytes per recv when reading a whole output (a raw frame is ~10 MB)

try:
    import adbutils
    from adbutils.errors import AdbConnectionError, AdbError, AdbTimeout
except ImportError as e:  # pragma: no cover - the android extra is missing
    raise ConfigError(
        f"the android device needs adbutils ({e}); install with: pip install 'devicerl[android]'"
    ) from None


class _Connection(adbutils.AdbConnection):
    """An adbutils connection that fails instead of starting a local adb server, reads large
    outputs in linear time and closes without adbutils' 10 ms sleep."""

    def _safe_connect(self) -> socket.socket:
        return self._create_socket()

    def read_until_close(self, encoding: str | None = "utf-8") -> str | bytes:
        chunks = []
        try:
            while chunk := self.conn.recv(_CHUNK):
                chunks.append(chunk)
        except TimeoutError:
            raise AdbTimeout("adb read timeout") from None
        data = b"".join(chunks)
        return data.decode(encoding, errors="replace") if encoding else data

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(OSError):
                self.conn.shutdown(socket.SHUT_WR)
            self.conn.close()
            self._AdbConnection__conn = None  # adbutils' own (name-mangled) field


class AdbClient(adbutils.AdbClient):
    """adbutils' client with a timeout on every socket and a cached server version."""

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        super().__init__(host, port, socket_timeout=timeout_s)
        self.timeout_s = timeout_s
        self._version: int | None = None

    def make_connection(self, timeout: float | None = None) -> adbutils.AdbConnection:
        limit = self.timeout_s if timeout is None else min(timeout, self.timeout_s)
        conn = _Connection(self.host, self.port)
        conn.conn.settimeout(limit)
        return conn

    def server_version(self) -> int:
        if self._version is None:
            self._version = super().server_version()
        return self._version


@contextlib.contextmanager
def device_errors(what: str, label: str, timeout_s: float) -> Iterator[None]:
    """Turn adbutils and socket failures of ``what`` into `DeviceTimeout` / `DeviceCrashed`."""
    try:
        yield
    except (AdbTimeout, TimeoutError) as e:
        raise DeviceTimeout(f"{label}: {what} got no answer within {timeout_s:g}s") from e
    except AdbConnectionError as e:
        raise DeviceCrashed(f"{label}: adb server unreachable during {what} ({e})") from e
    except (AdbError, OSError, EOFError) as e:
        detail = " ".join(str(a) for a in e.args) or type(e).__name__
        raise DeviceCrashed(f"{label}: {what} failed: {detail}") from e


class AdbLink:
    """Shell and exec commands on one device (``serial``) through one adb server."""

    def __init__(self, host: str, port: int, serial: str, timeout_s: float) -> None:
        self.client = AdbClient(host, port, timeout_s)
        self.serial = serial
        self.timeout_s = timeout_s
        self.label = f"android {serial} (adb {host}:{port})"
        self.device = adbutils.AdbDevice(self.client, serial=serial)

    def shell(self, command: str, timeout_s: float | None = None) -> bytes:
        """Output (stdout and stderr) of ``command`` run by the device's shell."""
        limit = timeout_s or self.timeout_s
        with device_errors(f"shell {command[:60]!r}", self.label, limit):
            return self.device.shell(command, timeout=limit, encoding=None)

    def exec_out(self, command: str, timeout_s: float | None = None) -> bytes:
        """Raw stdout of ``command`` (``adb exec-out``: no pty, binary-safe)."""
        limit = timeout_s or self.timeout_s
        with device_errors(f"exec-out {command[:60]!r}", self.label, limit):
            conn = self.device.open_transport(timeout=limit)
            try:
                conn.send_command("exec:" + command)
                conn.check_okay()
                return conn.read_until_close(encoding=None)
            finally:
                conn.close()

    def state(self) -> str:
        """``device``, ``offline``, ``unauthorized``... or ``absent`` (not on the server)."""
        states = dict(list_devices(self.client, self.label))
        return states.get(self.serial, "absent")

    def connect_network(self) -> str:
        """``adb connect`` for a network serial (``host:port``); the server's answer."""
        with device_errors("adb connect", self.label, self.timeout_s):
            return self.client.connect(self.serial, timeout=self.timeout_s) or ""


def list_devices(client: AdbClient, label: str) -> list[tuple[str, str]]:
    """(serial, state) of every device the adb server knows."""
    with device_errors("listing devices", label, client.timeout_s):
        return [(d.serial, d.state) for d in client.list()]


def is_network_serial(serial: str) -> bool:
    """``192.168.1.5:5555``-style serials are devices reached over TCP (``adb connect``)."""
    return re.fullmatch(r"[\w.\-\[\]:]+:\d+", serial) is not None


class DeviceClaim:
    """An exclusive claim on one device of one adb server, held by a lock file.

    ``flock`` locks belong to an open file, so two envs of one process exclude each other too,
    and the kernel releases a dead worker's claims.
    """

    def __init__(self, lock_dir: str | Path | None, host: str, port: int) -> None:
        self.dir = Path(lock_dir) if lock_dir else Path(tempfile.gettempdir()) / "devicerl-adb"
        self.server = f"{host}_{port}"
        self.serial: str | None = None
        self._fd: int | None = None

    def path(self, serial: str) -> Path:
        return self.dir / f"{re.sub(r'[^A-Za-z0-9.-]', '_', f'{self.server}_{serial}')}.lock"

    def acquire(self, serial: str) -> bool:
        """Claim ``serial`` (True), or False when another env holds it. Releases a previous
        claim on another device."""
        if self.serial == serial:
            return True
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path(serial), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self.release()
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.serial, self._fd = serial, fd
        return True

    def first_free(self, serials: Sequence[str]) -> str | None:
        """Claim the first free device of ``serials``; None when all are taken."""
        for serial in serials:
            if self.acquire(serial):
                return serial
        return None

    def release(self) -> None:
        fd, self._fd, self.serial = self._fd, None, None
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
