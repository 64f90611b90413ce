"""Asynchronous, supervised device pool: serial, subprocess and Ray workers."""

from devicerl.pool.episodes import Ready
from devicerl.pool.pool import EnvPool, make_backend
from devicerl.pool.supervisor import SupervisorConfig, kill_process_tree
from devicerl.pool.workers.base import Worker, WorkerBackend

__all__ = [
    "EnvPool",
    "Ready",
    "SupervisorConfig",
    "Worker",
    "WorkerBackend",
    "kill_process_tree",
    "make_backend",
]
