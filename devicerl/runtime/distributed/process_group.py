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
class ProcessGroupInfo:
    """This process's place in the group."""

    rank: int
    world_size: int
    device: torch.device
    backend: str
    released: bool = False  # rank 0 told the followers to stop


#: Where launchers put the number of processes (torchrun/accelerate, then MPI's).
WORLD_SIZE_VARS = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")


def launched() -> bool:
    """True inside a multi-process launch (``accelerate launch``, torchrun, mpirun)."""
    return any(int(os.environ.get(v, "1") or 1) > 1 for v in WORLD_SIZE_VARS)


def init_from_launcher() -> ProcessGroupInfo:
    """Join the group ``accelerate launch`` prepared (one process per rank): NCCL with a GPU
    per rank, gloo where there is no GPU (whatever launcher flag started the processes)."""
    from accelerate import PartialState

    state = PartialState(cpu=not torch.cuda.is_available(), timeout=WAIT)
    return ProcessGroupInfo(
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
) -> ProcessGroupInfo:
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
    return ProcessGroupInfo(rank, world_size, device, backend)


def broadcast(obj: Any = None, src: int = 0) -> Any:
    """``obj`` from rank ``src`` on every rank (rank 0 pickles only what it built itself)."""
    buf = [obj]
    dist.broadcast_object_list(buf, src=src)
    return buf[0]


def mean_metrics(metrics: dict[str, float], fingerprint: float) -> dict[str, float]:
    """Rank 0's view of all ranks' update results (see `combine`); a collective."""
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, (metrics, fingerprint))
    return combine(gathered)


def combine(results: list[tuple[dict[str, float], float]]) -> dict[str, float]:
    """Each metric averaged over the processes (losses were computed on each one's shard),
    their number, and how far their parameter fingerprints are apart (0.0: identical)."""
    first = results[0][0]
    out: dict[str, float] = {}
    for key, value in first.items():
        values = [float(m[key]) for m, _ in results if key in m]
        out[key] = sum(values) / len(values) if isinstance(value, int | float) else value
    prints = [f for _, f in results]
    out["train/learner_processes"] = float(len(results))
    out["train/learner_divergence"] = max(prints) - min(prints)
    return out


def leave() -> None:
    """Leave the process group (when one was formed)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
