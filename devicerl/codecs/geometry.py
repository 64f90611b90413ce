"""Where the device's screen lies in the image a model sees.

A GUI model writes coordinates in the frame of the image it was given, not of the device:
Qwen2.5-VL writes pixels of the image after its processor resized it (``smart_resize``: both
sides multiples of the patch size times the merge size, the area within ``[min_pixels,
max_pixels]``, the aspect ratio as close as those allow). `ImageGeometry` says exactly what that
image is (its size and the box the screen fills in it: the whole image after a resize, less
after padding, more after a crop), so a codec maps the model's coordinates to the device's
normalised screen and back without guessing.

`smart_resize` is the resize rule of transformers' Qwen2-VL image processor (which Qwen2.5-VL,
Qwen3-VL and UI-TARS use), so an agent computes the geometry before the processor runs;
`tests/test_codecs.py` checks it against the real processor. `SmartResize` and `KeepSize` are
the resize a server applies to a screenshot (what an API agent or a judge assumes when it
sends the screenshot as is).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from devicerl.actions import Point
from devicerl.errors import DataError

#: Qwen2-VL's processor refuses images whose long side exceeds the short one this many times.
MAX_ASPECT = 200


@dataclass(frozen=True)
class ImageGeometry:
    """The image a model sees (``size``: width, height in pixels, after every resize) and the
    box the screen fills in it (``box``: left, top, width, height in that image's pixels; None:
    the whole image)."""

    size: tuple[int, int]
    box: tuple[float, float, float, float] | None = None

    def __post_init__(self) -> None:
        w, h = self.size
        if int(w) != w or int(h) != h or w < 1 or h < 1:
            raise DataError(f"image size {self.size}: sides must be whole numbers >= 1")
        object.__setattr__(self, "size", (int(w), int(h)))
        if self.box is not None:
            box = tuple(float(v) for v in self.box)
            if len(box) != 4 or not all(map(math.isfinite, box)) or min(box[2:]) <= 0:
                raise DataError(f"screen box {self.box}: expected (left, top, width, height > 0)")
            object.__setattr__(self, "box", box)

    @property
    def screen_box(self) -> tuple[float, float, float, float]:
        """(left, top, width, height) of the screen in image pixels."""
        return self.box if self.box is not None else (0.0, 0.0, *map(float, self.size))

    def to_image(self, point: Point) -> tuple[float, float]:
        """A normalised screen point -> (x, y) in image pixels (not rounded)."""
        left, top, w, h = self.screen_box
        return left + point[0] * w, top + point[1] * h

    def to_screen(self, x: float, y: float) -> tuple[float, float]:
        """(x, y) in image pixels -> the normalised screen point (not clamped: outside the
        screen is below 0 or above 1)."""
        left, top, w, h = self.screen_box
        return (x - left) / w, (y - top) / h


def smart_resize(width: int, height: int, factor: int, min_pixels: int, max_pixels: int):
    """(width, height) of an image after Qwen2-VL's processor resizes it: the nearest multiples
    of ``factor``, scaled down (floor) into ``max_pixels`` or up (ceil) to ``min_pixels``."""
    if min(width, height) < 1:
        raise DataError(f"image size {width}x{height}: sides must be >= 1")
    if max(width, height) / min(width, height) > MAX_ASPECT:
        raise DataError(f"image size {width}x{height}: aspect ratio beyond {MAX_ASPECT}")
    h = round(height / factor) * factor
    w = round(width / factor) * factor
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return w, h


@dataclass(frozen=True)
class SmartResize:
    """The resize of a Qwen2-VL-style processor (``factor`` = patch size x merge size)."""

    factor: int
    min_pixels: int
    max_pixels: int

    def __call__(self, width: int, height: int) -> ImageGeometry:
        return ImageGeometry(smart_resize(width, height, self.factor, self.min_pixels,
                                          self.max_pixels))  # fmt: skip


@dataclass(frozen=True)
class KeepSize:
    """No resize that matters to coordinates (a model whose frame is relative to the image)."""

    def __call__(self, width: int, height: int) -> ImageGeometry:
        return ImageGeometry((width, height))


Resize = SmartResize | KeepSize
