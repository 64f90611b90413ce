"""The ``learner:`` section of a training config."""

from __future__ import annotations

from dataclasses import dataclass, field

from devicerl.errors import ConfigError


@dataclass
class LearnerConfig:
    """Where the learner runs. One process by default; ``accelerate launch --num_processes N``
    or ``num_workers: N`` (a Ray learner group) make it data-parallel."""

    num_workers: int = field(
        default=0,
        metadata={"help": "Ray learner actors forming one DDP group (0 or 1: in the trainer)"},
    )
    gpus_per_worker: float = field(
        default=0.0, metadata={"help": "GPUs per Ray learner actor (0: CPU, gloo; 1: NCCL)"}
    )
    cpus_per_worker: float = field(default=1.0, metadata={"help": "CPUs per Ray learner actor"})
    backend: str = field(
        default="auto",
        metadata={
            "help": "torch.distributed backend: auto (nccl on GPUs, else gloo), gloo or nccl"
        },
    )
    setup_timeout_s: float = field(
        default=300.0,
        metadata={"help": "give up when the group has not formed within this many seconds"},
    )

    def validate(self) -> None:
        if self.num_workers < 0 or self.gpus_per_worker < 0 or self.cpus_per_worker < 0:
            raise ConfigError(
                "learner.num_workers, learner.gpus_per_worker and learner.cpus_per_worker must "
                f"be >= 0, got {self.num_workers}, {self.gpus_per_worker}, {self.cpus_per_worker}"
            )
        if self.backend not in ("auto", "gloo", "nccl"):
            raise ConfigError(f"learner.backend must be auto, gloo or nccl, got {self.backend!r}")
