"""Data-parallel gradients: each process learns on its shard of the minibatch, then the
gradients are averaged with one bucketed all-reduce per dtype/device (what DDP's reducer does).

We do not wrap modules in `DistributedDataParallel`: a policy's training forward is not one
module call (AutoUI runs the T5 encoder, the fusion and the decoder apart; a learner computes
a loss from several calls), and DDP's reducer only works when every forward goes through its
wrapper. The hook gives the same result, is called once per optimizer step (after all
gradient-accumulation backwards), and keeps DDP's semantics for unused parameters: a parameter
without a gradient on every process keeps none, as in one process.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

import torch
import torch.distributed as dist
from torch import nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from devicerl.algos.grad_sync import GradSync

T = TypeVar("T")


def shard_bounds(n: int, rank: int, world_size: int) -> tuple[int, int]:
    """Contiguous, near-equal slices of ``n`` items (the first ``n % world_size`` get one more)."""
    base, extra = divmod(n, world_size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


class DataParallelSync(GradSync):
    """`GradSync` over the default torch.distributed process group (gloo or NCCL).

    Process r's loss is the mean over its n_r of the minibatch's B items, so the whole batch's
    gradient is sum_r (n_r / B) g_r: each process scales its gradients by n_r / B and the
    all-reduce sums them. All minibatches of one optimizer step must have the same size.
    """

    def __init__(self, process_group: dist.ProcessGroup | None = None) -> None:
        self.process_group = process_group
        self.rank = dist.get_rank(process_group)
        self.world_size = dist.get_world_size(process_group)
        self.fraction = 1.0

    def shard(self, batch: list[T]) -> list[T]:
        if len(batch) < self.world_size:
            raise ValueError(
                f"a minibatch of {len(batch)} cannot be split over {self.world_size} learner "
                "processes: raise the batch sizes to at least the number of processes"
            )
        start, end = shard_bounds(len(batch), self.rank, self.world_size)
        self.fraction = (end - start) / len(batch)
        return batch[start:end]

    def sync(self, params: Iterable[nn.Parameter]) -> None:
        params = [p for p in params if p.requires_grad]
        if not params:
            return
        # one all-reduce per dtype/device: the gradients (zeros where a process has none) and,
        # in the first bucket, whether each process had one (so unused ones stay None)
        had = [p.grad is not None for p in params]
        buckets: dict[tuple[torch.dtype, torch.device], list[int]] = {}
        for i, p in enumerate(params):
            buckets.setdefault((p.dtype, p.device), []).append(i)
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flags: list[float] = []
        for n, idx in enumerate(buckets.values()):
            part = [grads[i] for i in idx]
            flat = _flatten_dense_tensors(part).mul_(self.fraction)
            if n == 0:
                flat = torch.cat([flat, torch.tensor(had, dtype=flat.dtype, device=flat.device)])
            dist.all_reduce(flat, group=self.process_group)
            if n == 0:
                flags = flat[-len(params) :].tolist()
                flat = flat[: -len(params)]
            for i, synced in zip(idx, _unflatten_dense_tensors(flat, part)):
                grads[i].copy_(synced)
        for p, g, used in zip(params, grads, flags):
            p.grad = g if used > 0 else None  # no gradient anywhere: none, as in one process
