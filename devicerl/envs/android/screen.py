"""Decoding ``screencap`` output into H x W x 3 uint8 screenshots.

``screencap -p`` writes a PNG (the device compresses it: small transfer, slow on the device);
plain ``screencap`` writes the raw frame: a little-endian header (width, height, pixel format,
and since Android 9 a colour space) then the pixels (large transfer, no compression on the
device). Which is faster depends on the link: see the README's "Android devices" section.
"""

from __future__ import annotations

import io

import numpy as np

from devicerl.errors import DataError

#: screencap pixel formats (android.graphics.PixelFormat) -> bytes per pixel.
_RAW_FORMATS = {1: 4, 2: 4, 3: 3}  # RGBA_8888, RGBX_8888, RGB_888


def decode_png(data: bytes) -> np.ndarray:
    """A PNG as H x W x 3 uint8 (alpha dropped)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as img:
            return np.asarray(img.convert("RGB"), dtype=np.uint8)
    except (UnidentifiedImageError, OSError, ValueError) as e:
        head = data[:40]
        raise DataError(
            f"screencap -p returned no PNG ({len(data)} bytes, {head!r}): {e}"
        ) from None


def decode_raw(data: bytes) -> np.ndarray:
    """A raw ``screencap`` frame as H x W x 3 uint8."""
    if len(data) < 12:
        raise DataError(f"raw screencap too short ({len(data)} bytes)")
    width, height, fmt = np.frombuffer(data[:12], dtype="<u4")
    bpp = _RAW_FORMATS.get(int(fmt))
    if bpp is None:
        raise DataError(f"raw screencap pixel format {int(fmt)} is not supported (use png)")
    pixels = int(width) * int(height) * bpp
    header = len(data) - pixels
    if header not in (12, 16):
        raise DataError(
            f"raw screencap of {width}x{height} (format {int(fmt)}) has {len(data)} bytes, "
            f"expected {pixels} + a 12 or 16 byte header"
        )
    frame = np.frombuffer(data, dtype=np.uint8, count=pixels, offset=header)
    return frame.reshape(int(height), int(width), bpp)[:, :, :3].copy()


def decode(data: bytes, fmt: str) -> np.ndarray:
    return decode_png(data) if fmt == "png" else decode_raw(data)


def scaled_size(size: tuple[int, int], max_side: int) -> tuple[int, int]:
    """(width, height) shrunk so the longest side is at most ``max_side`` (0: unchanged)."""
    w, h = size
    if max_side <= 0 or max(w, h) <= max_side:
        return (w, h)
    scale = max_side / max(w, h)
    return (max(1, round(w * scale)), max(1, round(h * scale)))


def downscale(image: np.ndarray, max_side: int) -> np.ndarray:
    """``image`` shrunk (area averaging) so its longest side is at most ``max_side``."""
    h, w = image.shape[:2]
    size = scaled_size((w, h), max_side)
    if size == (w, h):
        return image
    from PIL import Image

    return np.asarray(Image.fromarray(image).resize(size, Image.BOX), dtype=np.uint8)
