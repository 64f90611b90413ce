"""Forming the torch.distributed process group and talking over it (objects, metrics).

Under ``accelerate launch`` accelerate's `PartialState` forms the group from the launcher's
environment (gloo with ``--cpu``, NCCL on GPUs) and picks each rank's device; Ray learner actors
and tests form it with `init_group` (a TCP rendezvous at rank 0's address).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

#: Followers wait in a collective while rank 0 collects data: allow long gaps between updates.
WAIT = timedelta(hours=12)


@dataclass
class GroupInfo:
    """This process's place in the group."""

    rank: int
    world_size: int
    device: torch.device
    backend: str
    released: bool = False  # rank 0 told the followers to stop


def launched() -> bool:
    """True inside a multi-process launch (``accelerate launch``/torchrun set WORLD_SIZE)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def init_from_launcher() -> GroupInfo:
    """Join the group ``accelerate launch`` prepared (one process per rank)."""
    from accelerate import PartialState

    state = PartialState(timeout=WAIT)
    return GroupInfo(
        state.process_index, state.num_processes, torch.device(state.device), dist.get_backend()
    )


def pick_backend(backend: str, device: torch.device) -> str:
    if backend != "auto":
        return backend
    return "nccl" if device.type == "cuda" else "gloo"


def free_port(host: str = "") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def init_group(
    rank: int,
    world_size: int,
    address: str,
    port: int,
    backend: str = "auto",
    device: torch.device | None = None,
    timeout_s: float = WAIT.total_seconds(),
) -> GroupInfo:
    """Form (or join) the default process group by TCP rendezvous at ``address:port``."""
    device = device or torch.device("cpu")
    backend = pick_backend(backend, device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend,
        init_method=f"tcp://{address}:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=timeout_s),
    )
    return GroupInfo(rank, world_size, device, backend)


def broadcast(obj: Any = None, src: int = 0) -> Any:
    """``obj`` from rank ``src`` on every rank (rank 0 pickles only what it built itself)."""
    buf = [obj]
    dist.broadcast_object_list(buf, src=src)
    return buf[0]


def mean_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """Each metric averaged over the ranks (losses were computed on each rank's shard)."""
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, metrics)
    out: dict[str, float] = {}
    for key, value in metrics.items():
        values = [float(m[key]) for m in gathered if key in m]
        out[key] = sum(values) / len(values) if isinstance(value, int | float) else value
    return out


def leave() -> None:
    """Leave the process group (when one was formed)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
