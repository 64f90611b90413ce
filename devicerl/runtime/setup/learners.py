"""What every process that learns does first: seed, and build the learner a config names. The
trainer, learner replicas on other processes and benchmarks share it."""

from __future__ import annotations

import os
import random

import numpy as np
import torch

from devicerl.agents.base import Policy, require_trainable
from devicerl.algos.base import Learner
from devicerl.runtime.setup.config import TrainConfig


def make_learner(cfg: TrainConfig, actor: Policy) -> Learner | None:
    """The learner ``cfg.algo`` names for ``actor`` (None for ``algo=none``)."""
    if cfg.algo == "none":
        return None
    require_trainable(actor)
    if cfg.algo == "digirl":
        from devicerl.algos.digirl import DigiRL

        return DigiRL(actor, cfg.digirl, cfg.actor, cfg.critic, seed=cfg.seed)
    if cfg.algo == "grpo":
        from devicerl.algos.grpo import GRPO

        return GRPO(actor, cfg.grpo, cfg.actor, seed=cfg.seed)
    if cfg.algo == "gigpo":
        from devicerl.algos.gigpo import GiGPO

        return GiGPO(actor, cfg.grpo, cfg.gigpo, cfg.actor, seed=cfg.seed)
    from devicerl.algos.filtered_bc import FilteredBC

    return FilteredBC(actor, cfg.filtered_bc, cfg.actor, seed=cfg.seed)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def set_torch_threads() -> None:
    """One torch CPU thread, which leaves the other cores to the devices, unless the environment
    sets ``OMP_NUM_THREADS`` (torch's own way to choose: then torch's default stands)."""
    if not os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(1)
