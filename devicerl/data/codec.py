"""Screenshot and value codecs for the trajectory store.

Images: `encode_image(pixels, codec)` / `decode_image(data)`. The codec is sniffed from the
bytes on decode (PNG, JPEG and WebP magic numbers, or our ``raw`` header), so a store may mix
codecs and readers need no codec column. Codec specs:

- ``"png"`` (lossless, zlib level 1), ``"png:6"`` (smaller, slower);
- ``"webp-lossless"`` (lossless, smaller than PNG, slower to encode);
- ``"jpeg:90"`` / ``"webp:90"`` (lossy; `LOSSY_BOUND` documents the error we accept);
- ``"raw"`` (lossless: a small header + zstd-compressed pixels; fastest, larger on photos,
  not viewable by browsers or Pillow, so the viewer re-encodes it).

Values: `dumps_json` / `loads_json` write JSON where numpy arrays survive exactly (tagged
base64) and numpy scalars become Python numbers. Tuples come back as lists.
"""

from __future__ import annotations

import base64
import io
import json
import struct
from typing import Any

import numpy as np

from devicerl.errors import DataError

#: The default screenshot codec (chosen by benchmarks/store_codec.py; see README).
DEFAULT_CODEC = "webp-lossless"

#: Worst-case quality we accept from a lossy codec at its default quality: mean absolute error
#: per channel (0-255 scale) and PSNR in dB, on UI screenshots. Tests hold lossy codecs to this.
LOSSY_BOUND = {"mean_abs_error": 4.0, "psnr_db": 30.0}

_RAW_MAGIC = b"DRLRAW1\x00"
#: The most pixels a stored screenshot may claim (a 4096 x 4096 screen): a file of a few KB can
#: claim any size, and decoding it would allocate that much.
MAX_PIXELS = 4096 * 4096
_NDARRAY_TAG = "__ndarray__"


def _parse_spec(codec: str) -> tuple[str, int | None]:
    name, _, arg = codec.partition(":")
    if name not in ("png", "jpeg", "webp", "webp-lossless", "raw"):
        raise ValueError(
            f"unknown image codec {codec!r} (use png, png:LEVEL, jpeg:Q, webp:Q, "
            "webp-lossless or raw)"
        )
    if arg and not arg.isdigit():
        raise ValueError(f"image codec {codec!r}: {arg!r} is not an integer")
    return name, int(arg) if arg else None


def check_codec(codec: str) -> str:
    """Validate a codec spec (raises ValueError naming it); returns it unchanged."""
    _parse_spec(codec)
    return codec


def encode_image(pixels: np.ndarray, codec: str = DEFAULT_CODEC) -> bytes:
    """H x W x 3 uint8 pixels -> compressed bytes in ``codec``."""
    name, arg = _parse_spec(codec)
    pixels = np.ascontiguousarray(pixels, dtype=np.uint8)
    if name == "raw":
        import pyarrow as pa

        h, w, c = pixels.shape
        packed = pa.compress(pixels.tobytes(), codec="zstd", asbytes=True)
        return _RAW_MAGIC + struct.pack("<III", h, w, c) + packed
    from PIL import Image

    img = Image.fromarray(pixels, "RGB")
    buf = io.BytesIO()
    if name == "png":
        img.save(buf, format="PNG", compress_level=1 if arg is None else arg)
    elif name == "jpeg":
        img.save(buf, format="JPEG", quality=90 if arg is None else arg)
    elif name == "webp":
        img.save(buf, format="WEBP", quality=90 if arg is None else arg, method=0)
    else:  # webp-lossless
        img.save(buf, format="WEBP", lossless=True, quality=0 if arg is None else arg, method=0)
    return buf.getvalue()


def image_format(data: bytes) -> str:
    """'png', 'jpeg', 'webp' or 'raw', from the magic bytes; raises DataError otherwise."""
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    if data[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    if data[:8] == _RAW_MAGIC:
        return "raw"
    # the bytes are not echoed: they may be any file's (an importer's image path)
    raise DataError(f"unknown image encoding ({len(data)} bytes, not PNG, JPEG, WebP or raw)")


def _check_size(fmt: str, width: int, height: int, channels: int = 3) -> None:
    if width <= 0 or height <= 0 or channels != 3:
        raise DataError(f"{fmt} image claims {width} x {height} x {channels}: not a screenshot")
    if width * height > MAX_PIXELS:
        raise DataError(
            f"{fmt} image claims {width} x {height} pixels, more than the {MAX_PIXELS} allowed"
        )


def _open_checked(fmt: str, data: bytes) -> Any:
    """A Pillow image of ``data`` (header read, nothing decoded), its claimed size checked."""
    from PIL import Image

    if fmt == "png" and len(data) >= 24:  # the header states the size: check it first
        _check_size(fmt, *struct.unpack(">II", data[16:24]))
    try:
        img = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError:
        raise DataError(f"{fmt} image claims more than the {MAX_PIXELS} pixels allowed") from None
    _check_size(fmt, *img.size)
    return img


def image_size(data: bytes) -> tuple[str, int, int]:
    """The format (as `image_format`) and the (width, height) an image claims, from its
    header: nothing is decoded; the size is checked as `decode_image` checks it."""
    fmt = image_format(data)
    try:
        if fmt == "raw":
            h, w, c = struct.unpack("<III", data[8:20])
            _check_size(fmt, w, h, c)
            return fmt, w, h
        with _open_checked(fmt, data) as img:
            return fmt, img.size[0], img.size[1]
    except DataError:
        raise
    except Exception as e:
        raise DataError(f"cannot decode {fmt} image: {e}") from None


def decode_image(data: bytes) -> np.ndarray:
    """Compressed bytes (any supported codec) -> H x W x 3 uint8 pixels. The size the image
    claims is checked (`MAX_PIXELS`) before anything is decoded."""
    fmt = image_format(data)
    try:
        if fmt == "raw":
            import pyarrow as pa

            h, w, c = struct.unpack("<III", data[8:20])
            _check_size(fmt, w, h, c)
            raw = pa.decompress(data[20:], decompressed_size=h * w * c, codec="zstd", asbytes=True)
            return np.frombuffer(raw, dtype=np.uint8).reshape(h, w, c).copy()
        with _open_checked(fmt, data) as img:
            return np.asarray(img.convert("RGB"), dtype=np.uint8).copy()
    except DataError:
        raise
    except Exception as e:
        raise DataError(f"cannot decode {fmt} image: {e}") from None


def image_error(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """Mean absolute error and PSNR between two images of the same shape."""
    diff = a.astype(np.float64) - b.astype(np.float64)
    mse = float(np.mean(diff**2))
    psnr = float("inf") if mse == 0 else 10.0 * np.log10(255.0**2 / mse)
    return {"mean_abs_error": float(np.mean(np.abs(diff))), "psnr_db": psnr}


# -- JSON values ---------------------------------------------------------------------------------
def _default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        data = base64.b64encode(np.ascontiguousarray(obj).tobytes()).decode("ascii")
        return {_NDARRAY_TAG: data, "dtype": obj.dtype.str, "shape": list(obj.shape)}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=repr)
    if hasattr(obj, "value") and isinstance(getattr(obj, "value", None), (str, int)):
        return obj.value  # enums
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def _hook(d: dict[str, Any]) -> Any:
    if _NDARRAY_TAG in d and "dtype" in d and "shape" in d:
        raw = base64.b64decode(d[_NDARRAY_TAG])
        return np.frombuffer(raw, dtype=np.dtype(d["dtype"])).reshape(d["shape"]).copy()
    return d


def dumps_json(value: Any) -> str | None:
    """JSON text of ``value`` (None stays None); numpy arrays are kept exactly."""
    if value is None:
        return None
    return json.dumps(value, default=_default, ensure_ascii=False, allow_nan=True)


def loads_json(text: str | None) -> Any:
    """Inverse of `dumps_json`."""
    if text is None:
        return None
    return json.loads(text, object_hook=_hook)
