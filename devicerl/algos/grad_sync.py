"""How a learner's minibatches are split and its gradients combined."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

import torch
from torch import nn

T = TypeVar("T")


class GradSync:
    """In one process: minibatches as they are, gradients untouched. The runtime swaps in a
    data-parallel version (`devicerl.runtime.distributed`), so the algorithms never see
    processes: each draws the whole minibatch, learns on ``shard(minibatch)`` and calls
    ``sync(params)`` between backward and clipping."""

    def shard(self, batch: list[T]) -> list[T]:
        """This process's part of a minibatch (every process drew the same one)."""
        return batch

    def sync(self, params: Iterable[nn.Parameter]) -> None:
        """Make ``params``' gradients those of the whole minibatch."""

    def step(
        self, params: list[nn.Parameter], optimizer: torch.optim.Optimizer, clip: float | None
    ) -> float | None:
        """One optimiser step after the backward passes: the gradients synced, clipped to
        ``clip`` (their norm before clipping is returned; None without a clip), applied."""
        self.sync(params)
        norm = float(nn.utils.clip_grad_norm_(params, clip)) if clip is not None else None
        optimizer.step()
        return norm
