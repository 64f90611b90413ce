"""The geometry of the image a Hugging Face processor makes of a screenshot, before it runs.

Qwen2-VL-style image processors (Qwen2-VL, Qwen2.5-VL, Qwen3-VL and the checkpoints built on
them: UI-TARS, GUI-Owl) resize with ``smart_resize`` to multiples of ``patch_size x merge_size``
(14 x 2 = 28 for Qwen2/2.5-VL, 16 x 2 = 32 for Qwen3-VL) with the area within the processor's
``size`` (``shortest_edge`` / ``longest_edge`` are its min / max pixels); processors with a fixed
``height`` x ``width`` (Gemma 3) resize to it. Neither pads nor crops a lone screenshot, so the
screen fills the image. Other processors keep the codec's view of the image as given (exact for
codecs whose frame is relative to the image, which is what those families use).
"""

from __future__ import annotations

from typing import Any

from devicerl.codecs import ImageGeometry, SmartResize


def _field(size: Any, key: str) -> Any:
    return size.get(key) if isinstance(size, dict) else getattr(size, key, None)


def processor_resize(image_processor: Any) -> SmartResize | tuple[int, int] | None:
    """The processor's resize: a `SmartResize`, a fixed (width, height), or None (unknown)."""
    if not getattr(image_processor, "do_resize", True):
        return None
    size = getattr(image_processor, "size", None)
    patch, merge = (getattr(image_processor, k, None) for k in ("patch_size", "merge_size"))
    low = _field(size, "shortest_edge") or getattr(image_processor, "min_pixels", None)
    high = _field(size, "longest_edge") or getattr(image_processor, "max_pixels", None)
    if isinstance(patch, int) and isinstance(merge, int) and low and high:
        return SmartResize(patch * merge, int(low), int(high))
    height, width = _field(size, "height"), _field(size, "width")
    if isinstance(height, int) and isinstance(width, int):
        return (width, height)
    return None


def processor_geometry(image_processor: Any, width: int, height: int) -> ImageGeometry:
    """The `ImageGeometry` of a ``width`` x ``height`` image after ``image_processor``."""
    resize = processor_resize(image_processor)
    if isinstance(resize, SmartResize):
        return resize(width, height)
    return ImageGeometry(resize if resize is not None else (width, height))
