"""Screenshots written as PNG files beside an exported dataset, each distinct one once."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from devicerl.data.codec import encode_image

FOLDER = "images"


class ImageFiles:
    """Writes screenshots under ``root/images/`` named by a hash of their pixels (and the size
    they are resized to, if any): a screen shown twice is one file. `path` returns the name
    relative to ``root``; ``written`` counts the files."""

    def __init__(self, root: Path, size: tuple[int, int] | None = None) -> None:
        self.root, self.size = root, size
        self.seen: set[str] = set()
        self.written = 0

    def path(self, pixels: np.ndarray) -> str:
        h = hashlib.sha256(pixels.tobytes())
        h.update(repr((pixels.shape, self.size)).encode())
        rel = f"{FOLDER}/{h.hexdigest()[:32]}.png"
        if rel not in self.seen:
            if self.size is not None and (pixels.shape[1], pixels.shape[0]) != self.size:
                from PIL import Image

                resized = Image.fromarray(pixels).resize(self.size, Image.Resampling.BICUBIC)
                pixels = np.asarray(resized)
            (self.root / FOLDER).mkdir(exist_ok=True)
            (self.root / rel).write_bytes(encode_image(pixels, "png"))
            self.seen.add(rel)
            self.written += 1
        return rel
