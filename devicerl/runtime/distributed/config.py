"""The ``learner:`` section of a training config."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass
class LearnerConfig:
    """Where the learner runs. One process by default; ``accelerate launch --num_processes N``
    or ``num_workers: N`` (a Ray learner group) make it data-parallel."""

    num_workers: int = field(
        default=0,
        metadata={
            "help": "Ray learner actors forming one DDP group (0 or 1: in the trainer)",
            "min": 0,
        },
    )
    gpus_per_worker: float = field(
        default=0.0,
        metadata={"help": "GPUs per Ray learner actor (0: CPU, gloo; 1: NCCL)", "min": 0},
    )
    cpus_per_worker: float = field(
        default=1.0, metadata={"help": "CPUs per Ray learner actor", "min": 0}
    )
    backend: Literal["auto", "gloo", "nccl"] = field(
        default="auto",
        metadata={
            "help": "torch.distributed backend: auto (nccl on GPUs, else gloo), gloo or nccl"
        },
    )
    setup_timeout_s: float = field(
        default=300.0,
        metadata={
            "help": "seconds to wait for the learner group to form before giving up",
            "gt": 0,
        },
    )
