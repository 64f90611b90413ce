"""AutoUI's image fusion: image features projected to d_model, attended to from the text encoder
states, mixed in through a sigmoid gate.

    img   = image_dense(features)                 # [B, P, d_model]
    att   = mha_layer(query=text, key=img, value=img)
    gate  = sigmoid(gate_dense([text; att]))
    fused = (1 - gate) * text + gate * att

Parameter names match the Auto-UI checkpoints (``image_dense.*``, ``mha_layer.*``,
``gate_dense.*`` at the top level of the T5 weights), so a real Auto-UI-Base checkpoint's fusion
weights load as they are. Our own saves keep them in a separate ``fusion.safetensors``.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from devicerl.errors import DataError

FUSION_PREFIXES = ("image_dense.", "mha_layer.", "gate_dense.")
FUSION_FILE = "fusion.safetensors"


class ImageFusion(nn.Module):
    """Gated cross-attention from text states to image tokens (see the module doc)."""

    def __init__(self, img_dim: int, d_model: int, num_heads: int = 1) -> None:
        super().__init__()
        self.img_dim, self.d_model = img_dim, d_model
        self.image_dense = nn.Linear(img_dim, d_model)
        self.mha_layer = nn.MultiheadAttention(d_model, num_heads, batch_first=True)
        self.gate_dense = nn.Linear(2 * d_model, d_model)

    def forward(self, text: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
        img = self.image_dense(image.to(text.dtype))
        att, _ = self.mha_layer(text, img, img, need_weights=False)
        gate = torch.sigmoid(self.gate_dense(torch.cat([text, att], -1)))
        return (1 - gate) * text + gate * att

    @classmethod
    def from_state(cls, state: dict[str, torch.Tensor], num_heads: int = 1) -> ImageFusion:
        """Build with the sizes the weights imply, then load them."""
        try:
            d_model, img_dim = state["image_dense.weight"].shape
        except KeyError:
            raise DataError("fusion weights lack image_dense.weight") from None
        fusion = cls(int(img_dim), int(d_model), num_heads)
        try:
            fusion.load_state_dict(state)
        except RuntimeError as e:
            raise DataError(f"fusion weights do not fit ({e})") from None
        return fusion


def _read_safetensors(path: Path, keys: list[str] | None = None) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            names = keys
            if names is None:  # safe_open has .keys() but is not iterable
                names = [k for k in f.keys() if k.startswith(FUSION_PREFIXES)]  # noqa: SIM118
            return {k: f.get_tensor(k) for k in names}
    except (OSError, SafetensorError) as e:
        raise DataError(f"{path}: cannot read weights ({e})") from None


def fusion_state_from_checkpoint(model_dir: Path) -> dict[str, torch.Tensor]:
    """The fusion weights stored inside an Auto-UI checkpoint's T5 weights (empty if none).

    Reads ``model.safetensors``, a sharded ``model.safetensors.index.json`` or a
    ``pytorch_model.bin`` (with ``torch.load(weights_only=True)``, which refuses pickled code).
    """
    single = model_dir / "model.safetensors"
    if single.exists():
        return _read_safetensors(single)
    index = model_dir / "model.safetensors.index.json"
    if index.exists():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError) as e:
            raise DataError(f"{index}: malformed index ({e})") from None
        state: dict[str, torch.Tensor] = {}
        wanted = [k for k in weight_map if k.startswith(FUSION_PREFIXES)]
        for shard in sorted({weight_map[k] for k in wanted}):
            keys = [k for k in wanted if weight_map[k] == shard]
            state.update(_read_safetensors(model_dir / shard, keys))
        return state
    binary = model_dir / "pytorch_model.bin"
    if binary.exists():
        try:
            full = torch.load(str(binary), map_location="cpu", weights_only=True, mmap=True)
        except Exception as e:
            raise DataError(f"{binary}: cannot read weights ({type(e).__name__}: {e})") from None
        return {k: v for k, v in full.items() if k.startswith(FUSION_PREFIXES)}
    return {}


def save_fusion(fusion: ImageFusion, path: Path) -> None:
    from safetensors.torch import save_file

    state = {k: v.detach().cpu().contiguous() for k, v in fusion.state_dict().items()}
    save_file(state, str(path), metadata={"num_heads": str(fusion.mha_layer.num_heads)})


def load_fusion(path: Path) -> ImageFusion:
    from safetensors import safe_open

    heads = 1
    try:
        with safe_open(str(path), framework="pt") as f:
            heads = int((f.metadata() or {}).get("num_heads", 1))
    except Exception as e:
        raise DataError(f"{path}: cannot read fusion weights ({e})") from None
    return ImageFusion.from_state(_read_safetensors(path, None), heads)
