"""The rules for every file devicerl reads from data or writes for a user, in one place.

Data that users exchange (stores, imports, suite files, configs) must never choose a path, hang
a reader or make it allocate without bound, so:

- `read_bytes` / `read_text` read a *regular* file only (a FIFO, a device or a folder named
  like one is refused, never opened for a blocking read), at most ``limit`` bytes, and, given
  ``within``, only when the file resolves inside that folder (no link out of it);
- `inside` resolves a path and checks it stays inside its folder; `safe_name` makes a file
  name from any text (an id, a task name) that can hold no separator, no ``..`` and no odd
  character;
- `check_output` checks a path the user named for output before any work starts: every name
  fits the file system and the nearest existing folder above it is writable;
- `write_text` / `write_json` are the one exit for text files: the text passes the secret
  scrubber (`devicerl.secrets.scrub`) and lands atomically (temp file, then rename).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from devicerl.errors import DataError, DeviceRLError, PathError
from devicerl.secrets import scrub

#: Longest file name and path most file systems take (checked before any work starts).
NAME_MAX = 255
PATH_MAX = 4096

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def inside(root: str | Path, path: str | Path, *, what: str = "path") -> Path:
    """``path`` resolved (links followed), or `PathError` when it leads outside ``root``."""
    base = Path(root).resolve()
    resolved = Path(path).resolve()
    if resolved != base and not resolved.is_relative_to(base):
        raise PathError(f"{what} {path} leads outside {base}: refused")
    return resolved


def read_bytes(
    path: str | Path,
    limit: int,
    *,
    within: str | Path | None = None,
    what: str = "file",
    error: type[DeviceRLError] = DataError,
) -> bytes:
    """The content of the regular file ``path`` (at most ``limit`` bytes), else ``error`` in
    one line naming the path: missing, not a regular file, larger than ``limit``, or (with
    ``within``) resolving outside that folder."""
    p = Path(path)
    if within is not None:
        try:
            inside(within, p, what=what)
        except PathError as e:
            raise error(str(e)) from None
    try:  # O_NONBLOCK: opening a FIFO for reading must not wait for a writer
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise error(f"cannot read {what} {p}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{what} {p} is {_kind(st.st_mode)}, not a regular file: refused")
        if st.st_size > limit:
            raise error(f"{what} {p} is {st.st_size} bytes, more than the {limit} allowed")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise error(f"cannot read {what} {p}: {e.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > limit:  # grew while we read
        raise error(f"{what} {p} is more than the {limit} bytes allowed")
    return data


def read_text(
    path: str | Path,
    limit: int,
    *,
    within: str | Path | None = None,
    what: str = "file",
    error: type[DeviceRLError] = DataError,
) -> str:
    """`read_bytes` decoded as UTF-8; other bytes are refused in one line naming the place."""
    data = read_bytes(path, limit, within=within, what=what, error=error)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise error(
            f"{what} {path} is not UTF-8 text: byte 0x{data[e.start]:02x} on line {line}"
        ) from None


def is_regular(path: str | Path, *, within: str | Path | None = None) -> bool:
    """Whether ``path`` is a regular file (links followed) inside ``within`` (when given)."""
    try:
        if within is not None:
            inside(within, path)
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, PathError):
        return False


def safe_name(text: str, *, max_len: int = 64) -> str:
    """A file name made from ``text``: its safe characters (letters, digits, ``.-_``, no
    leading dot) and a hash of the whole, so two texts never share a name and no text can
    name a path."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    stem = _UNSAFE.sub("-", text).strip(".-")[: max(0, max_len - 17)]
    return f"{stem}-{digest}" if stem else digest


def check_output(
    path: str | Path, *, what: str = "--out", kind: str = "folder", error=PathError
) -> Path:
    """Check, before any work, that ``path`` can be written as a ``kind`` ("folder" or
    "file"): every name fits, an existing ``path`` is of that kind, and the nearest existing
    folder above it is writable. Returns the path; raises ``error`` in one line."""
    p = Path(path)
    text = os.fsencode(str(p))
    if not text.strip():
        raise error(f"{what}: empty path")
    if len(os.fsencode(str(p.absolute()))) > PATH_MAX:
        raise error(f"{what} {_short(str(p))}: path longer than {PATH_MAX} bytes")
    for part in p.parts:
        size = len(os.fsencode(part))
        if size > NAME_MAX:
            raise error(
                f"{what}: the name {_short(part, 24)} ({size} bytes) is longer than the "
                f"{NAME_MAX} a file system takes"
            )
    if p.exists() or p.is_symlink():
        if kind == "folder" and not p.is_dir():
            raise error(f"{what} {p} exists and is not a folder")
        if kind == "file" and p.is_dir():
            raise error(f"{what} {p} is a folder, not a file")
        if kind == "file" and p.exists() and not p.is_file():
            raise error(f"{what} {p} is not a regular file")
        target = p if kind == "folder" else p.parent
    else:
        target = p.parent
        while not target.exists():
            if target.is_symlink():
                raise error(f"{what} {p}: {target} is a broken link")
            target = target.parent
        if not target.is_dir():
            raise error(f"{what} {p}: {target} is not a folder")
    if not os.access(target, os.W_OK | os.X_OK):
        raise error(f"{what} {p}: folder {target} is not writable")
    try:  # permissions do not tell all (root, read-only mounts, /proc): try it
        os.rmdir(tempfile.mkdtemp(prefix=".devicerl-probe-", dir=target))
    except OSError as e:
        raise error(f"{what} {p}: folder {target} is not writable ({e.strerror})") from None
    return p


def check_apart(
    out: str | Path,
    inputs: Sequence[tuple[str, str | Path]],
    *,
    what: str = "--out",
    error: type[Exception] = PathError,
) -> None:
    """Refuse, in one line and before anything is written, an output (``out``, named ``what``)
    inside one of a command's ``inputs`` (name, path) or holding one: writing there would copy
    an input into itself or, replacing the output, delete what is being read. Paths are
    compared resolved (links followed), so a link cannot hide the overlap. An empty ``out``
    (``--out ""``, which a path would read as "here") is refused too."""
    if not str(out).strip():
        raise error(f"{what}: empty path")
    o = Path(os.path.realpath(out))
    for name, path in inputs:
        i = Path(os.path.realpath(path))
        if o == i or i in o.parents:
            raise error(f"{what} {out} is inside {name} {path}: write outside the inputs")
        if o in i.parents:
            raise error(f"{what} {out} holds {name} {path}: write outside the inputs")


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file's content, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _short(s: str, n: int = 60) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through the secret scrubber, atomically (a reader never sees
    a half-written file; a secret never reaches the disk)."""
    return write_text_parts(path, [text])


def write_text_parts(path: str | Path, parts: Iterable[str]) -> Path:
    """`write_text` of the concatenated ``parts``, written as they come (a page too large to
    hold whole); each part is scrubbed on its own, so no part may split a secret."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for part in parts:
                f.write(scrub(part))
        os.replace(tmp, p)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        if e.errno in (errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EACCES, errno.EROFS):
            raise PathError(f"cannot write {p}: {e.strerror}") from None
        raise
    except BaseException:  # the parts failed (or an interrupt): no half-written file is left
        tmp.unlink(missing_ok=True)
        raise
    return p


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically, replacing whatever entry was there: a link
    planted at that name is replaced, never followed."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(tmp, flags, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return p


def write_json(path: str | Path, obj: Any, *, indent: int | None = 2) -> Path:
    """`write_text` of ``obj`` as JSON (non-JSON values as their text)."""
    return write_text(path, json.dumps(obj, indent=indent, default=str) + "\n")
