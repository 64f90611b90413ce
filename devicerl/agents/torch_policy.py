"""Shared plumbing of the trainable (PyTorch) agents: parameters, weights, versions, devices."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from devicerl.agents.base import Policy
from devicerl.errors import DataError


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``None``/"auto" picks CUDA when available, else CPU."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


class TorchPolicy(Policy):
    """A policy whose trainable state is ``self.module`` (an `nn.Module`).

    Weights published with `get_weights` are the parameters that require gradients (for a LoRA
    model: the adapters and the fusion layers, not the frozen base), as CPU tensors.
    """

    trainable = True
    module: nn.Module
    device: torch.device

    def parameters(self) -> Iterator[nn.Parameter]:
        return (p for p in self.module.parameters() if p.requires_grad)

    def named_trainable(self) -> dict[str, nn.Parameter]:
        return {n: p for n, p in self.module.named_parameters() if p.requires_grad}

    def get_weights(self) -> dict[str, torch.Tensor]:
        return {n: p.detach().to("cpu", copy=True) for n, p in self.named_trainable().items()}

    def set_weights(self, weights: Mapping[str, Any], version: int | None = None) -> None:
        own = self.named_trainable()
        missing = sorted(set(own) - set(weights))
        unexpected = sorted(set(weights) - set(own))
        if missing or unexpected:
            raise DataError(
                f"{type(self).__name__}.set_weights: weights do not match the model "
                f"(missing {missing[:3]}{'...' if len(missing) > 3 else ''}, "
                f"unexpected {unexpected[:3]}{'...' if len(unexpected) > 3 else ''})"
            )
        with torch.no_grad():
            for name, p in own.items():
                w = torch.as_tensor(weights[name])
                if w.shape != p.shape:
                    raise DataError(
                        f"{type(self).__name__}.set_weights: {name} has shape "
                        f"{tuple(w.shape)}, the model expects {tuple(p.shape)}"
                    )
                p.copy_(w.to(p.device, p.dtype))
        self.version = self.version + 1 if version is None else int(version)

    def train(self, mode: bool = True) -> TorchPolicy:
        self.module.train(mode)
        return self

    def eval(self) -> TorchPolicy:
        return self.train(False)

    def to(self, device: str | torch.device) -> TorchPolicy:
        self.device = resolve_device(device)
        self.module.to(self.device)
        return self

    def num_parameters(self, trainable_only: bool = False) -> int:
        params = self.parameters() if trainable_only else self.module.parameters()
        return sum(p.numel() for p in params)


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"{path}: missing (is this a saved agent directory?)") from None
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected a JSON object")
    return data
