"""Coordinate frames: how a family writes a point of the image it sees.

- `Pixels`: whole pixels of the image (Qwen2.5-VL, UI-TARS-1.5: the image after the
  processor's resize).
- `Grid`: whole numbers from 0 to ``n`` across the image (UI-TARS: 1000; Qwen3-VL: 999).
- `Unit`: decimals in [0, 1] across the image (Aguvis: 4 decimals).

Every frame goes through `ImageGeometry`, so padding and crops are accounted for. Reading
clamps a point that lies at most one step of the frame outside the screen onto its edge (a
model writing 1092 for the last column of a 1092-pixel image); a point further out is refused.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from devicerl.actions import Point
from devicerl.codecs.geometry import ImageGeometry

Number = int | float


class Frame(ABC):
    """Writes normalised screen points as the family's numbers and reads them back."""

    @abstractmethod
    def scale(self, geometry: ImageGeometry) -> tuple[float, float]:
        """Frame units per image pixel along x and y."""

    @abstractmethod
    def quantise(self, value: float) -> Number:
        """A coordinate as the family writes it."""

    def write(self, point: Point, geometry: ImageGeometry) -> tuple[Number, Number]:
        x, y = geometry.to_image(point)
        sx, sy = self.scale(geometry)
        return self.quantise(x * sx), self.quantise(y * sy)

    def read(self, x: float, y: float, geometry: ImageGeometry) -> Point | None:
        """The normalised screen point, or None when it lies outside the screen by more
        than one step of the frame."""
        sx, sy = self.scale(geometry)
        u, v = geometry.to_screen(x / sx, y / sy)
        su, sv = self.step(geometry)
        if not (-su <= u <= 1 + su and -sv <= v <= 1 + sv):
            return None
        return min(max(u, 0.0), 1.0), min(max(v, 0.0), 1.0)

    def read_pair(self, value: object, geometry: ImageGeometry) -> Point | str:
        """A model's ``[x, y]`` (or ``(x, y)``) as a normalised screen point, or why it is
        not one."""
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            return f"{value!r} is not an (x, y) pair"
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            return f"{value!r} is not numeric"
        point = self.read(float(value[0]), float(value[1]), geometry)
        return point if point is not None else f"{list(value)} is outside the screen"

    def step(self, geometry: ImageGeometry) -> tuple[float, float]:
        """One step of the frame in normalised screen units (x, y): the finest move it can
        write."""
        sx, sy = self.scale(geometry)
        _, _, w, h = geometry.screen_box
        return self.resolution / (sx * w), self.resolution / (sy * h)

    resolution: float = 1.0


@dataclass(frozen=True)
class Pixels(Frame):
    """Whole pixels of the image the model sees."""

    def scale(self, geometry: ImageGeometry) -> tuple[float, float]:
        return 1.0, 1.0

    def quantise(self, value: float) -> Number:
        return round(value)


@dataclass(frozen=True)
class Grid(Frame):
    """Whole numbers from 0 to ``n`` across the image's width and height."""

    n: int

    def scale(self, geometry: ImageGeometry) -> tuple[float, float]:
        w, h = geometry.size
        return self.n / w, self.n / h

    def quantise(self, value: float) -> Number:
        return round(value)


@dataclass(frozen=True)
class Unit(Frame):
    """Decimals in [0, 1] across the image, rounded to ``decimals``."""

    decimals: int

    def scale(self, geometry: ImageGeometry) -> tuple[float, float]:
        w, h = geometry.size
        return 1.0 / w, 1.0 / h

    def quantise(self, value: float) -> Number:
        return round(float(value), self.decimals) + 0.0  # never "-0.0"

    @property
    def resolution(self) -> float:  # type: ignore[override]
        return 10.0**-self.decimals
