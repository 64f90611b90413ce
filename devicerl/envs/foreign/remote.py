"""The foreign side: the one module another Python environment needs to host a devicerl device.

This file imports nothing from devicerl and nothing outside the standard library (numpy arrays
are sent when the device returns them, without importing numpy here), so it runs unchanged
under any Python >= 3.8 of another virtual environment: the host starts ``PYTHON remote.py``
by path, and a device class written for that environment answers through it.

Messages are plain data both ways, never pickles: each frame is an 8-byte header (two
big-endian uint32: JSON length, binary length), a UTF-8 JSON object, then raw bytes. Binary
values (a screenshot) travel in the raw part: in the JSON they are ``{"__blob__": [offset,
nbytes], "shape": [...], "dtype": "uint8"}`` (``shape`` / ``dtype`` only for arrays).

The conversation (host -> foreign, then the foreign side's answer):

- ``{"op": "start", "device": "MODULE:CLASS" or "/path/file.py:CLASS", "options": {...}}``
  -> ``{"ok": true, "versions": {...}, "pid": N}``; the device is built with ``**options``.
- ``{"op": "reset", "task": {"name", "instruction", "max_steps", "params"}, "seed": N}``
  -> ``{"ok": true, "observation": OBS, "info": {...}}`` (``info`` from the device's optional
  ``reset_info()``: facts about the episode the host needs, kept out of the observation)
- ``{"op": "step", "action": {...}}`` -> ``{"ok": true, "observation": OBS, "status": STATUS}``
- ``{"op": "close"}`` -> the process exits.

Any failure answers ``{"ok": false, "error": {"type", "message", "traceback"}}``; an exception
class named ``ConfigError`` or ``TaskError`` (define your own or use the ones below) tells the
host that a restart will not help. ``OBS`` is ``{"instruction", "screen_size": [w, h],
"screenshot": H x W x 3 uint8 array or null, "elements": [{"id", "role", "text", "value",
"bbox": [left, top, right, bottom], "clickable", "focused", "editable", "attrs"}], "extras"}``;
``STATUS`` is ``{"done", "success", "raw_reward", "info"}`` (docs/bring-your-benchmark.md).

The device class: ``__init__(**options)``, ``reset(task: dict, seed: int) -> OBS``,
``step(action: dict) -> {"observation": OBS, "status": STATUS}``, optional ``close()``,
``reset_info() -> dict`` and ``versions() -> dict`` (package versions worth reporting).

Whatever the device prints goes to stderr: the protocol owns the process's original stdout.
The process exits when the host closes the pipe or dies (it checks its parent every second).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import platform
import struct
import sys
import threading
import time
import traceback

PROTOCOL = 1
_HEADER = struct.Struct(">II")
#: Largest JSON / binary part a frame may announce (a corrupt header must not allocate GBs).
MAX_JSON_BYTES = 64 << 20
MAX_BLOB_BYTES = 512 << 20


class ConfigError(Exception):
    """The device cannot run as configured (missing package, server or variable)."""


class TaskError(Exception):
    """The task cannot be run by this device."""


class ProtocolError(Exception):
    """A frame broke the protocol (bad header, JSON or blob reference)."""


# -- frames ----------------------------------------------------------------------------------
def _extract_blobs(value, blobs):
    """``value`` with bytes and arrays replaced by blob references (appended to ``blobs``)."""
    if isinstance(value, dict):
        return {str(k): _extract_blobs(v, blobs) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_extract_blobs(v, blobs) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        ref = {"__blob__": [sum(len(b) for b in blobs), len(data)]}
        blobs.append(data)
        return ref
    if getattr(value, "ndim", None) == 0 and callable(getattr(value, "item", None)):
        return value.item()  # a numpy scalar
    if hasattr(value, "__array_interface__") and hasattr(value, "tobytes"):
        data = value.tobytes()  # C order
        ref = {"__blob__": [sum(len(b) for b in blobs), len(data)]}
        ref["shape"] = [int(n) for n in value.shape]
        ref["dtype"] = str(value.dtype)
        blobs.append(data)
        return ref
    return value


def encode(message):
    """One frame (bytes) for a JSON-able ``message`` whose values may be bytes or arrays."""
    blobs = []
    body = json.dumps(_extract_blobs(message, blobs), allow_nan=False).encode("utf-8")
    blob = b"".join(blobs)
    return _HEADER.pack(len(body), len(blob)) + body + blob


def _read_exact(stream, n):
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise EOFError("the other side closed the pipe")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(stream):
    """``(message, blob)`` of the next frame: the JSON object and its raw bytes (blob
    references are left for the reader to resolve: `blob_bytes`)."""
    n_json, n_blob = _HEADER.unpack(_read_exact(stream, _HEADER.size))
    if n_json > MAX_JSON_BYTES or n_blob > MAX_BLOB_BYTES:
        raise ProtocolError(f"frame announces {n_json} JSON and {n_blob} binary bytes")
    try:
        message = json.loads(_read_exact(stream, n_json).decode("utf-8"))
    except ValueError as e:
        raise ProtocolError(f"frame is not UTF-8 JSON: {e}") from None
    if not isinstance(message, dict):
        raise ProtocolError("frame is not a JSON object")
    return message, _read_exact(stream, n_blob)


def blob_bytes(ref, blob):
    """The bytes a blob reference points at, checked against the frame's raw part."""
    try:
        offset, nbytes = (int(v) for v in ref["__blob__"])
    except (TypeError, ValueError, KeyError):
        raise ProtocolError(f"bad blob reference {ref!r}") from None
    if offset < 0 or nbytes < 0 or offset + nbytes > len(blob):
        raise ProtocolError(f"blob reference {ref!r} lies outside the frame's {len(blob)} bytes")
    return blob[offset : offset + nbytes]


def _decode_plain(value, blob):
    """Blob references as bytes (the device side receives no arrays)."""
    if isinstance(value, dict):
        if "__blob__" in value:
            return blob_bytes(value, blob)
        return {k: _decode_plain(v, blob) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode_plain(v, blob) for v in value]
    return value


# -- the serving loop --------------------------------------------------------------------------
def _load_class(spec):
    """``module:Class`` or ``/path/to/file.py:Class`` -> the class."""
    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise ConfigError(f"device {spec!r} is not MODULE:CLASS or FILE.py:CLASS")
    if where.endswith(".py"):
        module_name = "_devicerl_foreign_" + os.path.basename(where)[:-3].replace("-", "_")
        loader = importlib.util.spec_from_file_location(module_name, where)
        if loader is None or not os.path.isfile(where):
            raise ConfigError(f"device file {where!r} does not exist")
        module = importlib.util.module_from_spec(loader)
        sys.modules[module_name] = module
        loader.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    try:
        return getattr(module, name)
    except AttributeError:
        raise ConfigError(f"{where} has no {name!r}") from None


def _error(e):
    kind = type(e).__name__
    if isinstance(e, (ImportError, ModuleNotFoundError)):
        kind = "ConfigError"  # a package missing from this environment: no restart helps
    text = str(e).strip()
    return {
        "ok": False,
        "error": {
            "type": kind,
            "message": text.splitlines()[0] if text else repr(e),
            "traceback": "".join(traceback.format_exception(type(e), e, e.__traceback__))[-4000:],
        },
    }


def _versions(device):
    out = {"python": platform.python_version()}
    extra = getattr(device, "versions", None)
    if callable(extra):
        out.update({str(k): str(v) for k, v in extra().items()})
    return out


def _handle(device, message, blob):
    op = message.get("op")
    if op == "reset":
        answer = {"ok": True, "observation": device.reset(message["task"], int(message["seed"]))}
        if callable(getattr(device, "reset_info", None)):
            answer["info"] = device.reset_info()
        return answer
    if op == "step":
        answer = device.step(_decode_plain(message["action"], blob))
        return {"ok": True, **answer}
    raise ProtocolError(f"unknown op {op!r}")


def _watch_parent(parent):
    """Exit when the host process is gone (a killed host must not leave devices behind)."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(1)


def _private_streams():
    """The protocol's own copies of stdin/stdout; fd 1 then points at stderr, fd 0 at
    /dev/null, so nothing the device prints or reads can corrupt a frame."""
    proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout = sys.stderr
    return proto_in, proto_out


def serve():
    """Answer the host's messages until it closes the pipe or says ``close``."""
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    proto_in, proto_out = _private_streams()
    device = None
    try:
        while True:
            try:
                message, blob = read_frame(proto_in)
            except EOFError:
                return
            if message.get("op") == "close":
                return
            try:
                if message.get("op") == "start":
                    device = _load_class(message["device"])(**(message.get("options") or {}))
                    answer = {"ok": True, "protocol": PROTOCOL, "pid": os.getpid(),
                              "versions": _versions(device)}  # fmt: skip
                elif device is None:
                    raise ProtocolError("the first message must be 'start'")
                else:
                    answer = _handle(device, message, blob)
                frame = encode(answer)
            except Exception as e:
                frame = encode(_error(e))
            proto_out.write(frame)
    finally:
        close = getattr(device, "close", None)
        if callable(close):
            try:
                close()
            except Exception:
                traceback.print_exc()


if __name__ == "__main__":
    serve()
