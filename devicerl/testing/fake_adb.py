"""A fake adb server on loopback, serving recorded screens: for tests and dry runs.

It speaks the adb host smart-socket protocol that adbutils (and the adb binary) use: 4-hex-digit
length-prefixed requests answered with ``OKAY`` / ``FAIL`` + message; ``host:version``,
``host:devices[-l]``, ``host:connect:ADDR``, ``host-serial:S:get-state|features``,
``host:transport:S`` and ``host:tport:serial:S`` (switch the connection to a device), then
``shell:CMD``, ``shell,v2:CMD`` (stdout/exit packets) or ``exec:CMD`` on that device.

Command lines are parsed by a real POSIX shell (``dash``, as the device's ``sh`` would), so
quoting bugs show up exactly as on a device: the shell runs the line with every device command
(``input``, ``am``, ``screencap``...) defined as a function that records its argv; the
`FakeDevice` then executes the recorded commands: ``input tap/swipe/keyevent/text`` (text with
Android's ``%s`` rule, appended to `FakeDevice.typed`), ``am force-stop``, ADBKeyboard's
``am broadcast -a ADB_INPUT_B64`` (only typed when that IME is active), ``am start -n
package/activity`` (one of the device's ``apps``: it becomes `FakeDevice.foreground`), ``cmd
package query-activities --components`` (the ``apps``, one per line, as Android's
PackageManagerShellCommand prints them; "No activities found" without any), ``screencap [-p]``,
``uiautomator dump PATH``, ``cat PATH``, ``wm size``, ``settings get``, ``getprop``. Output is
produced by Python after the line ran, so shell redirections do not apply to it.

Faults: `FakeDevice.hang` (the device stops answering), ``state`` (offline, unauthorized),
`FakeAdbServer.remove` (unplugged), `FakeAdbServer.drop` (the server dies: open connections are
cut and new ones refused) and `FakeAdbServer.restart`. `FakeEmulatorConsole` plays an
emulator console (auth token, ``avd snapshot load``).
"""

from __future__ import annotations

import base64
import contextlib
import io
import random
import re
import shutil
import socket
import struct
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from devicerl.envs.android.input import ADB_KEYBOARD_IME

#: Commands the fake device knows (the shell records their argv instead of running them).
DEVICE_COMMANDS = (
    "input", "am", "cmd", "screencap", "uiautomator", "cat", "wm", "settings", "getprop"
)  # fmt: skip
_PLAIN = re.compile(r"[\w ./=:,-]*", re.ASCII)  # lines a shell would split on spaces only
_PRELUDE = "".join(
    f'{c}() {{ printf "%s\\0" "$(($# + 1))" {c} "$@" >&3; }}\n' for c in DEVICE_COMMANDS
)
_SHELL = shutil.which("dash") or "/bin/sh"
GBOARD_IME = "com.google.android.inputmethod.latin/com.android.inputmethod.latin.LatinIME"


def android_input_text(arg: str) -> str:
    """What ``input text ARG`` types: Android turns ``%s`` into a space (InputShellCommand)."""
    out: list[str] = []
    escape = False
    for c in arg:
        if escape and c == "s":
            out[-1] = " "
            escape = False
            continue
        escape = c == "%"
        out.append(c)
    return "".join(out)


def shell_argvs(line: str) -> tuple[list[list[str]], bytes]:
    """The device commands a POSIX shell runs for ``line`` (argv lists, in order) and the
    shell's own error output (syntax errors, unknown commands)."""
    if _PLAIN.fullmatch(line):
        return [line.split()], b""
    script = f"{_PRELUDE}{{\n{line}\n}} 3>&1 >/dev/null"
    done = subprocess.run([_SHELL, "-c", script], capture_output=True, timeout=10)
    tokens = done.stdout.split(b"\0")[:-1]
    argvs, i = [], 0
    while i < len(tokens):
        n = int(tokens[i])
        argvs.append([t.decode("utf-8", "surrogateescape") for t in tokens[i + 1 : i + 1 + n]])
        i += n + 1
    return argvs, done.stderr


@dataclass
class FakeScreen:
    """A recorded screen: the frame (H x W x 3 uint8) and its uiautomator dump."""

    image: np.ndarray
    xml: str = ""
    _png: bytes | None = field(default=None, repr=False)
    _raw: bytes | None = field(default=None, repr=False)

    @property
    def png(self) -> bytes:
        if self._png is None:
            from PIL import Image

            buf = io.BytesIO()
            Image.fromarray(self.image).save(buf, format="PNG", compress_level=1)
            self._png = buf.getvalue()
        return self._png

    def raw(self) -> bytes:
        """``screencap`` without ``-p``: width, height, format 1 (RGBA_8888), colour space."""
        if self._raw is None:
            h, w = self.image.shape[:2]
            rgba = np.concatenate([self.image, np.full((h, w, 1), 255, np.uint8)], axis=2)
            self._raw = struct.pack("<IIII", w, h, 1, 0) + rgba.tobytes()
        return self._raw


class FakeDevice:
    """A device of the fake server: recorded screens and a log of what it was told to do.

    Screen changes: HOME shows screen 0; any other input (an app started too) shows the next
    screen (cyclically); ``on_input(device, argv)`` replaces that rule. ``apps`` are the
    launcher activities (``package/activity``) the device lists and starts.
    """

    def __init__(
        self,
        serial: str,
        screens: list[FakeScreen],
        *,
        state: str = "device",
        ime: str = GBOARD_IME,
        network: bool = False,
        props: dict[str, str] | None = None,
        on_input: Callable[[FakeDevice, list[str]], None] | None = None,
        apps: Sequence[str] = (),
    ) -> None:
        if not screens:
            raise ValueError("a fake device needs at least one screen")
        self.serial = serial
        self.screens = screens
        self.state = state
        self.ime = ime
        self.network = network  #: reached over TCP: listed only after ``adb connect``
        self.connected = not network
        self.props = dict(props or {})
        self.on_input = on_input
        self.apps = list(apps)
        self.foreground: str | None = None  #: the app last started (``am start -n``)
        self.screen = 0
        self.typed = ""
        self.commands: list[list[str]] = []  #: argv of every device command run
        self.lines: list[str] = []  #: every shell/exec line received
        self.files: dict[str, str] = {}
        self.ui_fails = False  #: ``uiautomator dump`` fails ("could not get idle state")
        self._hang = threading.Event()
        self._lock = threading.Lock()

    @property
    def hang(self) -> bool:
        return self._hang.is_set()

    @hang.setter
    def hang(self, value: bool) -> None:
        self._hang.set() if value else self._hang.clear()

    @property
    def size(self) -> tuple[int, int]:
        h, w = self.screens[0].image.shape[:2]
        return (w, h)

    @property
    def inputs(self) -> list[list[str]]:
        """The ``input`` / ``am`` commands received (what the agent did to the device)."""
        return [c for c in self.commands if c and c[0] in ("input", "am")]

    def run(self, line: str) -> bytes:
        """Execute one shell line; its output."""
        argvs, errors = shell_argvs(line)
        with self._lock:
            self.lines.append(line)
            out = b"".join(self._command(argv) for argv in argvs)
        return out + errors

    def _command(self, argv: list[str]) -> bytes:
        self.commands.append(argv)
        name, args = argv[0], argv[1:]
        current = self.screens[self.screen]
        if name == "input":
            return self._input(args)
        if name == "am":
            return self._am(args)
        if name == "cmd":
            return self._cmd(args)
        if name == "screencap":
            return current.png if "-p" in args else current.raw()
        if name == "uiautomator" and args[:1] == ["dump"]:
            path = args[1] if len(args) > 1 else "/sdcard/window_dump.xml"
            if self.ui_fails:
                self.files.pop(path, None)
                return b"ERROR: could not get idle state.\n"
            self.files[path] = current.xml
            return b""
        if name == "cat":
            if args and args[0] in self.files:
                return self.files[args[0]].encode()
            return f"cat: {args[0] if args else ''}: No such file or directory\n".encode()
        if name == "wm" and args == ["size"]:
            return f"Physical size: {self.size[0]}x{self.size[1]}\n".encode()
        if name == "settings" and args == ["get", "secure", "default_input_method"]:
            return f"{self.ime}\n".encode()
        if name == "getprop":
            return f"{self.props.get(args[0], '') if args else ''}\n".encode()
        return f"/system/bin/sh: {name}: inaccessible or not found\n".encode()

    def _input(self, args: list[str]) -> bytes:
        kind = args[0] if args else ""
        if kind == "text" and len(args) == 2:
            self.typed += android_input_text(args[1])
        elif kind == "keyevent" and len(args) == 2:
            self.typed += {"66": "\n", "61": "\t"}.get(args[1], "")
        elif kind not in ("tap", "swipe"):
            return f"Error: Unknown command: {kind} {args[1:]}\n".encode()
        self._changed(["input", *args])
        return b""

    def _changed(self, argv: list[str]) -> None:
        if self.on_input is not None:
            self.on_input(self, argv)
        elif argv == ["input", "keyevent", "3"]:
            self.screen = 0
        else:
            self.screen = (self.screen + 1) % len(self.screens)

    def _cmd(self, args: list[str]) -> bytes:
        if args[:2] != ["package", "query-activities"]:
            return f"Unknown command: {' '.join(args[:2])}\n".encode()
        return "".join(f"{a}\n" for a in self.apps).encode() or b"No activities found\n"

    def _am(self, args: list[str]) -> bytes:
        if args[:1] == ["force-stop"]:
            return b""
        if args[:3] == ["broadcast", "-a", "ADB_INPUT_B64"] and args[3:4] == ["--es"]:
            if self.ime == ADB_KEYBOARD_IME:
                self.typed += base64.b64decode(args[5]).decode("utf-8")
            return b"Broadcasting: Intent { act=ADB_INPUT_B64 flg=0x400000 }\n" + (
                b"Broadcast completed: result=0\n"
            )
        if args[:2] == ["start", "-n"] and len(args) == 3:
            if args[2] not in self.apps:
                return f"Error: Activity class {{{args[2]}}} does not exist.\n".encode()
            self.foreground = args[2]
            self._changed(["am", *args])
            return f"Starting: Intent {{ cmp={args[2]} }}\n".encode()
        return b"Error: unknown am command\n"


def _bound_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def _bound_outside_ephemeral(host: str) -> socket.socket:
    """A socket bound to a free port below the kernel's ephemeral range. While the server is
    down (`drop`), a client that keeps reconnecting to a port inside that range can be given
    the same port as its own source port and connect to itself, and the port is then taken
    when the server starts again."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    ports = range(max(1025, low - 12000), low)
    for port in random.sample(ports, min(200, len(ports))):
        with contextlib.suppress(OSError):
            return _bound_socket(host, port)
    return _bound_socket(host, 0)  # nothing free down there: any port


class FakeAdbServer:
    """``with FakeAdbServer([FakeDevice(...)]) as srv: make("android", adb_port=srv.port)``."""

    def __init__(self, devices: list[FakeDevice], host: str = "127.0.0.1", version: int = 41):
        self.devices = {d.serial: d for d in devices}
        self.host = host
        self.port = 0
        self.version = version
        self.requests: list[str] = []  #: every smart-socket request, in order
        self._listener: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> FakeAdbServer:
        """Listen (on the port of an earlier start, so clients find it again after `drop`)."""
        if self.port:
            sock = _bound_socket(self.host, self.port)
        else:
            sock = _bound_outside_ephemeral(self.host)
        sock.listen(64)
        self.port = sock.getsockname()[1]
        self._listener = sock
        self._stopped.clear()
        threading.Thread(target=self._accept, args=(sock,), daemon=True).start()
        return self

    def drop(self) -> None:
        """The server dies: cut every open connection and refuse new ones."""
        self._stopped.set()
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with self._lock:
            conns, self._conns = self._conns, set()
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()

    def restart(self) -> None:
        """Listen again on the same port (after `drop`)."""
        self.drop()
        self.start()

    def remove(self, serial: str) -> FakeDevice:
        """Unplug a device (it disappears from ``host:devices``)."""
        return self.devices.pop(serial)

    def __enter__(self) -> FakeAdbServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.drop()

    # -- protocol -----------------------------------------------------------------------------
    def _accept(self, sock: socket.socket) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            with self._lock:
                self._conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            device: FakeDevice | None = None
            while True:
                request = _read_request(conn)
                if request is None:
                    return
                self.requests.append(request)
                if device is None:
                    device = self._host_service(conn, request)
                    if device is None:
                        return
                else:
                    self._device_service(conn, device, request)
                    return
        except OSError:
            return
        finally:
            with self._lock:
                self._conns.discard(conn)
            conn.close()

    def _listed(self) -> list[FakeDevice]:
        return [d for d in list(self.devices.values()) if d.connected]

    def _find(self, serial: str) -> tuple[FakeDevice | None, str]:
        device = self.devices.get(serial)
        if device is None or not device.connected:
            return None, f"device '{serial}' not found"
        if device.state != "device":
            return None, f"device {device.state}"
        return device, ""

    def _host_service(self, conn: socket.socket, request: str) -> FakeDevice | None:
        """Answer a host request; the device when the connection switched to one."""
        if request == "host:version":
            _okay(conn, f"{self.version:04x}")
        elif request in ("host:devices", "host:devices-l"):
            _okay(conn, "".join(f"{d.serial}\t{d.state}\n" for d in self._listed()))
        elif request.startswith("host:connect:"):
            addr = request.split(":", 2)[2]
            device = self.devices.get(addr)
            if device is None:
                _okay(conn, f"failed to connect to '{addr}': Connection refused")
            else:
                device.connected = True
                _okay(conn, f"connected to {addr}")
        elif request.startswith(("host:tport:serial:", "host:transport:")):
            device, error = self._find(request.split(":", 3 if "tport" in request else 2)[-1])
            if device is None:
                _fail(conn, error)
                return None
            conn.sendall(b"OKAY" + (struct.pack("<Q", 1) if "tport" in request else b""))
            return device
        elif request.startswith("host-serial:"):
            serial, _, what = request[len("host-serial:") :].rpartition(":")
            device, error = self._find(serial)
            if device is None:
                _fail(conn, error)
            elif what == "get-state":
                _okay(conn, device.state)
            elif what == "features":
                _okay(conn, "shell_v2,cmd,stat_v2")
            else:
                _fail(conn, f"unsupported host-serial service {what!r}")
        else:
            _fail(conn, f"unknown host service {request!r}")
        return None

    def _device_service(self, conn: socket.socket, device: FakeDevice, request: str) -> None:
        if device.hang:  # the device stopped answering: keep the connection open, say nothing
            while device.hang and not self._stopped.wait(0.05):
                pass
            return
        service, _, line = request.partition(":")
        if service not in ("shell", "shell,v2", "exec"):
            _fail(conn, f"unknown device service {service!r}")
            return
        out = device.run(line)
        if service == "shell,v2":
            packets = struct.pack("<BI", 1, len(out)) + out + struct.pack("<BIB", 3, 1, 0)
            conn.sendall(b"OKAY" + packets)
        else:
            conn.sendall(b"OKAY")
            conn.sendall(out)


def _read_request(conn: socket.socket) -> str | None:
    head = _read_exact(conn, 4)
    if head is None:
        return None
    body = _read_exact(conn, int(head, 16))
    return None if body is None else body.decode("utf-8", "surrogateescape")


def _read_exact(conn: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def _block(text: str) -> bytes:
    data = text.encode("utf-8")
    return f"{len(data):04x}".encode() + data


def _okay(conn: socket.socket, text: str) -> None:
    conn.sendall(b"OKAY" + _block(text))


def _fail(conn: socket.socket, text: str) -> None:
    conn.sendall(b"FAIL" + _block(text))


class FakeEmulatorConsole:
    """An emulator console on loopback: asks for ``token``, loads snapshots in ``snapshots``
    (``on_load(name)`` is called for each load), records every command line."""

    def __init__(
        self,
        token: str,
        snapshots: tuple[str, ...] = ("default_boot",),
        on_load: Callable[[str], None] | None = None,
    ) -> None:
        self.token = token
        self.snapshots = snapshots
        self.on_load = on_load
        self.commands: list[str] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rwb") as f:
            f.write(
                b"Android Console: Authentication required\r\n"
                b"Android Console: type 'auth <auth_token>' to authenticate\r\nOK\r\n"
            )
            f.flush()
            authed = False
            for raw in f:
                line = raw.decode().strip()
                self.commands.append(line)
                f.write(self._reply(line, authed).encode())
                f.flush()
                authed = authed or line == f"auth {self.token}"
                if line == "quit":
                    return

    def _reply(self, line: str, authed: bool) -> str:
        if line.startswith("auth "):
            ok = line == f"auth {self.token}"
            return "OK\r\n" if ok else "KO: authentication token does not match\r\n"
        if not authed:
            return "KO: unknown command, try 'help'\r\n"
        m = re.fullmatch(r"avd snapshot load (\S+)", line)
        if m:
            if m.group(1) not in self.snapshots:
                return f"KO: snapshot '{m.group(1)}' does not exist\r\n"
            if self.on_load is not None:
                self.on_load(m.group(1))
            return "OK\r\n"
        return "OK\r\n" if line == "quit" else "KO: unknown command\r\n"

    def close(self) -> None:
        self._sock.close()
