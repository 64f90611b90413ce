"""Loading and writing the parts of a Hugging Face vision-language model the agent needs.

- `model_type`: the family a model folder's ``config.json`` names (its default codec).
- `load_processor`: ``AutoProcessor`` for a local model folder. transformers builds the video
  processor of Qwen-VL and SmolVLM processors with torchvision; where torchvision is missing
  (CPU machines with a CPU-only torch) the same processor class is built without its video
  part, which a policy over screenshots never uses.
- `is_vision_module` / `lora_targets`: which modules belong to the vision tower (always frozen)
  and which linear layers LoRA adapts (the configured names outside the vision tower).
- `write_adapter`: a LoRA adapter folder in peft's layout (``adapter_config.json`` +
  ``adapter_model.safetensors``) from published weights alone, so an agent that acts through a
  server writes what vLLM's ``/v1/load_lora_adapter`` loads without holding the model.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from devicerl.agents.vlm.config import VLMLoRA
from devicerl.errors import ConfigError, DataError

#: Module names under which the families keep their vision encoder (Qwen-VL: ``visual``,
#: Idefics3/SmolVLM: ``vision_model``, Gemma 3/PaliGemma/LLaVA: ``vision_tower``).
VISION_NAMES = frozenset({"visual", "vision_tower", "vision_model", "vision_encoder"})
ADAPTER_CONFIG, ADAPTER_WEIGHTS = "adapter_config.json", "adapter_model.safetensors"
#: peft's name of the single adapter a `get_peft_model` model carries.
ADAPTER_NAME = "default"

_DTYPES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float64": torch.float64,
}


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """``auto``: bfloat16 on a GPU, float32 on a CPU."""
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    try:
        return _DTYPES[name]
    except KeyError:
        raise ConfigError(f"vlm.dtype: {name!r} is not one of auto, {', '.join(_DTYPES)}") from None


def _processor_class_name(folder: Path) -> str | None:
    for name in ("processor_config.json", "preprocessor_config.json", "tokenizer_config.json"):
        path = folder / name
        if path.exists():
            try:
                data = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            if isinstance(data, dict) and isinstance(data.get("processor_class"), str):
                return data["processor_class"]
    return None


def model_type(folder: str | Path) -> str | None:
    """The ``model_type`` of a model folder's ``config.json`` (its family: ``qwen2_5_vl``,
    ``qwen3_vl``, ...), or None when it has none."""
    try:
        data = json.loads((Path(folder) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    kind = data.get("model_type") if isinstance(data, dict) else None
    return kind if isinstance(kind, str) else None


def image_only(cls: type) -> type:
    """``cls`` (a processor class taking a video processor) without its video processor: the
    processor mixin takes its parts from the ``__init__`` signature and skips videos when the
    part is missing. Named as ``cls``, so saving writes the real class name."""

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        cls.__init__(self, image_processor, tokenizer, None, chat_template=chat_template, **kwargs)

    return type(cls.__name__, (cls,), {"__init__": __init__, "__module__": cls.__module__})


def load_processor(folder: str | Path) -> Any:
    """The model's processor (tokenizer + image processor + chat template) from ``folder``."""
    import inspect

    import transformers
    from transformers import AutoProcessor
    from transformers.utils import is_torchvision_available

    folder = Path(folder)
    name = _processor_class_name(folder)
    cls = getattr(transformers, name, None) if name else None
    if (
        cls is not None
        and not is_torchvision_available()
        and "video_processor" in inspect.signature(cls.__init__).parameters
    ):
        return image_only(cls).from_pretrained(str(folder))
    return AutoProcessor.from_pretrained(str(folder))


def is_vision_module(name: str) -> bool:
    return any(part in VISION_NAMES for part in name.split("."))


def lora_targets(model: nn.Module, lora: VLMLoRA) -> list[str]:
    """Full names of the linear layers LoRA adapts: last name in ``lora.target_modules``,
    outside the vision tower. Full names keep peft from matching a vision layer that shares a
    language layer's last name (SigLIP's ``q_proj``)."""
    wanted = set(lora.target_modules)
    out = [
        name
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear)
        and name.rsplit(".", 1)[-1] in wanted
        and not is_vision_module(name)
    ]
    if not out:
        raise ConfigError(
            f"vlm.lora.target_modules {list(lora.target_modules)}: no linear layer of "
            f"{type(model).__name__} has one of these names"
        )
    return sorted(out)


def lora_config(lora: VLMLoRA, targets: Iterable[str], base_dir: str | None) -> Any:
    from peft import LoraConfig

    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=0.0,  # the log-probs recorded while acting are those training recomputes
        target_modules=sorted(targets),
        base_model_name_or_path=base_dir,
    )


def adapter_key(name: str) -> str:
    """A trainable parameter's name in a `PeftModel` -> its key in peft's adapter file."""
    return name.replace(f".{ADAPTER_NAME}.", ".")


def adapter_module(name: str) -> str:
    """The adapted layer's full name in the base model, from a LoRA parameter's name."""
    return name.split(".lora_", 1)[0].removeprefix("base_model.model.")


def write_adapter(
    weights: Mapping[str, torch.Tensor], lora: VLMLoRA, base_dir: str | None, out: Path
) -> Path:
    """Write the LoRA weights in ``weights`` (names as `PeftModel` has them) as a peft adapter
    folder ``out``; returns ``out``."""
    from safetensors.torch import save_file

    names = [n for n in weights if ".lora_" in n]
    if not names:
        raise DataError("no LoRA weights to write as an adapter (is vlm.lora set?)")
    out.mkdir(parents=True, exist_ok=True)
    cfg = lora_config(lora, {adapter_module(n) for n in names}, base_dir)
    cfg.save_pretrained(str(out))
    tensors = {adapter_key(n): weights[n].detach().to("cpu").contiguous() for n in names}
    save_file(tensors, str(out / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    return out
