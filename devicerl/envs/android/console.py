"""The Android emulator console: what ``adb emu <command>`` does, without the adb binary.

Each emulator listens on a console port (5554 for ``emulator-5554``) of the machine it runs
on. The console greets with a banner ending in ``OK``, asks for ``auth <token>`` (the token is
in ``~/.emulator_console_auth_token`` of the user running the emulator), then answers each
command with its output and a final ``OK`` line or ``KO: <reason>``. adbutils has no console
client, so this module speaks the protocol itself (used for ``avd snapshot load NAME``).
"""

from __future__ import annotations

import contextlib
import re
import socket
from pathlib import Path

from devicerl.errors import ConfigError, DeviceCrashed, DeviceError, DeviceTimeout

DEFAULT_TOKEN_PATH = "~/.emulator_console_auth_token"


def console_port(serial: str) -> int | None:
    """The console port of an emulator serial (``emulator-5554`` -> 5554), else None."""
    m = re.fullmatch(r"emulator-(\d+)", serial)
    return int(m.group(1)) if m else None


class EmulatorConsole:
    """One console session: ``with EmulatorConsole(host, port, ...) as c: c.command(...)``."""

    def __init__(
        self, host: str, port: int, token_path: str = DEFAULT_TOKEN_PATH, timeout_s: float = 60.0
    ) -> None:
        self.where = f"emulator console {host}:{port}"
        self.token_path = Path(token_path).expanduser()
        self.timeout_s = timeout_s
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout_s)
        except TimeoutError as e:
            raise DeviceTimeout(f"{self.where}: no connection within {timeout_s:g}s") from e
        except OSError as e:
            raise DeviceCrashed(f"{self.where}: cannot connect ({e})") from e
        self.file = self.sock.makefile("rb")
        try:
            banner = self._answer("greeting")
            if "auth" in banner.lower():
                self.command(f"auth {self._token()}", what="authentication")
        except BaseException:
            self.close()
            raise

    def _token(self) -> str:
        try:
            return self.token_path.read_text().strip()
        except OSError as e:
            raise ConfigError(
                f"{self.where} asks for a token and {self.token_path} cannot be read "
                f"({e.strerror}); set emulator_console_token_file to the emulator's token file"
            ) from None

    def _answer(self, what: str) -> str:
        """Lines up to the final ``OK``; raises `DeviceError` on ``KO``."""
        lines = []
        try:
            while True:
                raw = self.file.readline()
                if not raw:
                    raise DeviceCrashed(f"{self.where}: connection closed during {what}")
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if line == "OK":
                    return "\n".join(lines)
                if line.startswith("KO"):
                    raise DeviceError(f"{self.where}: {what} failed: {line[2:].lstrip(': ')}")
                lines.append(line)
        except TimeoutError as e:
            raise DeviceTimeout(f"{self.where}: {what} got no answer in {self.timeout_s:g}s") from e
        except OSError as e:
            raise DeviceCrashed(f"{self.where}: {what} failed ({e})") from e

    def command(self, line: str, what: str | None = None) -> str:
        """Send one console command; its output (without the final ``OK``)."""
        try:
            self.sock.sendall(line.encode("utf-8") + b"\r\n")
        except OSError as e:
            raise DeviceCrashed(f"{self.where}: cannot send {line.split()[0]!r} ({e})") from e
        return self._answer(what or repr(line))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.sendall(b"quit\r\n")
        self.file.close()
        self.sock.close()

    def __enter__(self) -> EmulatorConsole:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
