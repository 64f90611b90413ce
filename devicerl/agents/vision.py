"""A frozen vision encoder for the AutoUI-style agent, loaded from a local directory.

Any transformers vision model that `AutoModel` loads works (ViT, CLIP/SigLIP vision towers,
DINOv2, a BLIP-2 vision model saved on its own); for a composite model (CLIP, BLIP-2) its
``vision_model`` is used. Features are either ``pooled`` (one vector per screenshot, as AutoUI
uses BLIP-2's pooled 1408-d feature) or ``patch`` (all patch tokens).

Pre-computed features can skip the encoder: put an array of shape (dim,) or (tokens, dim) in
``Observation.extras["image_features"]`` (e.g. BLIP-2 features extracted offline, as DigiRL did).
A missing screenshot encodes as a black image.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch
from torch import nn

from devicerl.errors import ConfigError
from devicerl.records import Observation

log = logging.getLogger(__name__)

FEATURE_MODES = ("pooled", "patch")


class VisionEncoder(nn.Module):
    """Screenshots -> image features ``[B, tokens, dim]`` (frozen; no gradients)."""

    def __init__(self, model: nn.Module, processor: object | None, features: str = "pooled"):
        super().__init__()
        if features not in FEATURE_MODES:
            raise ConfigError(f"vision features must be one of {FEATURE_MODES}, got {features!r}")
        self.model = model.eval().requires_grad_(False)
        self.processor = processor
        self.features = features
        cfg = getattr(model, "config", None)
        self.dim = int(getattr(cfg, "hidden_size", 0) or 0)
        self.image_size = int(getattr(cfg, "image_size", 224) or 224)

    @classmethod
    def from_pretrained(cls, path: str | Path, features: str = "pooled") -> VisionEncoder:
        from transformers import AutoImageProcessor, AutoModel

        path = Path(path)
        if not (path / "config.json").exists():
            raise ConfigError(f"vision encoder {path}: no config.json (expected a local model dir)")
        model = AutoModel.from_pretrained(str(path))
        if hasattr(model, "vision_model"):
            model = model.vision_model
        try:
            processor = AutoImageProcessor.from_pretrained(str(path))
        except (OSError, ValueError) as e:
            log.info("vision encoder %s: no image processor (%s); using resize + 0.5 norm", path, e)
            processor = None
        return cls(model, processor, features)

    def _pixels(self, images: list[np.ndarray]) -> torch.Tensor:
        if self.processor is not None:
            out = self.processor(images=images, return_tensors="pt")  # type: ignore[operator]
            return out["pixel_values"]
        from PIL import Image

        s = self.image_size
        arr = np.stack([np.asarray(Image.fromarray(i).resize((s, s)), np.float32) for i in images])
        return torch.from_numpy((arr / 255.0 - 0.5) / 0.5).permute(0, 3, 1, 2).contiguous()

    @torch.no_grad()
    def encode_images(self, images: list[np.ndarray]) -> torch.Tensor:
        device = next(self.model.parameters()).device
        dtype = next(self.model.parameters()).dtype
        pixels = self._pixels(images).to(device, dtype)
        out = self.model(pixel_values=pixels)
        if self.features == "pooled":
            pooled = getattr(out, "pooler_output", None)
            if pooled is None:
                pooled = out.last_hidden_state.mean(1)
            return pooled.unsqueeze(1).float()
        return out.last_hidden_state.float()

    def forward(self, observations: list[Observation]) -> torch.Tensor:
        """Features for each observation (pre-computed ones from extras are used as given)."""
        pre = [o.extras.get("image_features") for o in observations]
        todo = [i for i, p in enumerate(pre) if p is None]
        computed: dict[int, torch.Tensor] = {}
        if todo:
            images = [_image(observations[i], self.image_size) for i in todo]
            feats = self.encode_images(images)
            computed = {i: feats[k] for k, i in enumerate(todo)}
        device = next(self.model.parameters()).device
        rows = []
        for i, p in enumerate(pre):
            if p is None:
                rows.append(computed[i])
            else:
                t = torch.as_tensor(np.asarray(p), dtype=torch.float32, device=device)
                rows.append(t.reshape(-1, t.shape[-1]))
        return _pad(rows)


def _image(obs: Observation, size: int) -> np.ndarray:
    if obs.screenshot is not None:
        return np.ascontiguousarray(obs.screenshot)
    return np.zeros((size, size, 3), np.uint8)


def _pad(rows: list[torch.Tensor]) -> torch.Tensor:
    n = max(r.shape[0] for r in rows)
    dims = {r.shape[-1] for r in rows}
    if len(dims) != 1:
        raise ConfigError(f"image features of different sizes in one batch: {sorted(dims)}")
    out = rows[0].new_zeros(len(rows), n, dims.pop())
    for i, r in enumerate(rows):
        out[i, : r.shape[0]] = r
    return out
