"""Few-shot examples for the VLM judge, from a manifest (YAML/JSON) or a folder of images.

Manifest (``examples.yaml``; image paths are relative to the manifest)::

    examples:
      - instruction: Open the settings app
        images: [home.png, settings.png]     # oldest first; the last is the final screen
        label: success                       # or failure
        rationale: The settings app is open.  # optional
        actions: ["tap(0.500, 0.800)"]       # optional

A top-level list of entries works too. A folder is read through its ``manifest.yaml``,
``manifest.yml`` or ``manifest.json`` if it has one; otherwise from the layout
``success/NAME.png`` and ``failure/NAME.png`` (one screenshot per example), with the task in
``NAME.txt`` beside each image.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from devicerl.errors import DataError
from devicerl.judges.base import Label
from devicerl.judges.prompt import Example

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")
MANIFESTS = ("manifest.yaml", "manifest.yml", "manifest.json")


def load_image(path: Path) -> np.ndarray:
    """An H x W x 3 uint8 array; `DataError` naming the file when unreadable."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            return np.asarray(img.convert("RGB"), dtype=np.uint8)
    except (OSError, UnidentifiedImageError) as e:
        raise DataError(f"image {path}: cannot read ({e})") from None


def _label(value: Any, where: str) -> Label:
    if isinstance(value, bool):
        return Label.SUCCESS if value else Label.FAILURE
    try:
        label = Label(str(value).strip().lower())
    except ValueError:
        label = Label.UNKNOWN
    if label is Label.UNKNOWN:
        raise DataError(f"{where}: label must be success or failure, got {value!r}")
    return label


def _entry(entry: Any, root: Path, where: str) -> Example:
    if not isinstance(entry, dict):
        raise DataError(f"{where}: expected a mapping, got {entry!r}")
    unknown = set(entry) - {"instruction", "images", "label", "rationale", "actions"}
    if unknown:
        raise DataError(f"{where}: unknown keys {sorted(unknown)}")
    images = entry.get("images")
    if isinstance(images, str):
        images = [images]
    if not images or not isinstance(images, list):
        raise DataError(f"{where}: needs a non-empty 'images' list")
    if not entry.get("instruction"):
        raise DataError(f"{where}: needs an 'instruction'")
    return Example(
        instruction=str(entry["instruction"]),
        images=tuple(load_image(root / str(p)) for p in images),
        label=_label(entry.get("label"), where),
        rationale=str(entry.get("rationale") or ""),
        actions=tuple(str(a) for a in entry.get("actions") or ()),
    )


def load_manifest(path: Path) -> list[Example]:
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as e:
        raise DataError(f"few-shot manifest {path}: cannot read ({e})") from None
    entries = data.get("examples") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise DataError(f"few-shot manifest {path}: expected a list of examples")
    return [
        _entry(e, path.parent, f"few-shot manifest {path}, example {i}")
        for i, e in enumerate(entries)
    ]


def _load_folder(root: Path) -> list[Example]:
    examples = []
    for label in (Label.SUCCESS, Label.FAILURE):
        for img in sorted((root / label.value).glob("*")):
            if img.suffix.lower() not in IMAGE_SUFFIXES:
                continue
            task = img.with_suffix(".txt")
            if not task.is_file():
                raise DataError(f"few-shot example {img}: missing its task file {task.name}")
            examples.append(
                Example(task.read_text(encoding="utf-8").strip(), (load_image(img),), label)
            )
    if not examples:
        raise DataError(f"few-shot folder {root}: no success/ or failure/ images found")
    return examples


def load_examples(path: str | Path) -> list[Example]:
    """Examples from a manifest file or a folder (see the module doc)."""
    p = Path(path).expanduser()
    if p.is_dir():
        for name in MANIFESTS:
            if (p / name).is_file():
                return load_manifest(p / name)
        return _load_folder(p)
    if p.is_file():
        return load_manifest(p)
    raise DataError(f"few-shot examples {p}: no such file or folder")
