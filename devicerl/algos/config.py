"""The algorithms' configuration dataclasses, apart from their torch code.

Loading a config or printing `devicerl train --help` needs these classes but not torch, so they
live here; `devicerl.algos.base`, `digirl` and `filtered_bc` re-export them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal


@dataclass
class ActorConfig:
    """Optimisation of the actor (defaults follow DigiRL's repository where they fit a
    from-scratch small agent; see the README's Training section)."""

    lr: float = field(default=1e-4, metadata={"help": "actor learning rate (AdamW)", "gt": 0})
    lr_versions: int = field(
        default=0,
        metadata={
            "help": "the learning rate falls linearly from lr to lr_final over this many policy "
            "versions, then stays there (0: constant lr)",
            "min": 0,
        },
    )
    lr_final: float = field(
        default=0.0, metadata={"help": "the learning rate after lr_versions versions", "min": 0}
    )
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay", "min": 0})
    updates: int = field(default=20, metadata={"help": "actor updates per iteration", "min": 0})
    max_epochs: float = field(
        default=0.0,
        metadata={
            "help": "addition: at most this many passes over the imitated steps per iteration "
            "(fewer updates when few steps are imitated, so a small sample is not fitted over "
            "and over; 0: always `updates`, as the paper)",
            "min": 0,
        },
    )
    batch_size: int = field(
        default=64,
        metadata={"help": "steps per actor minibatch", "min": 1, "max_key": "replay_capacity"},
    )
    grad_accum: int = field(
        default=1, metadata={"help": "minibatches per optimizer step", "min": 1}
    )
    grad_clip: float = field(
        default=1.0, metadata={"help": "gradient-norm clip (0: none)", "min": 0}
    )
    entropy_coef: float = field(
        default=0.0,
        metadata={
            "help": "weight of an entropy bonus on states drawn from the whole replay (0: the "
            "paper's pure regression; needs an agent with entropy())",
            "min": 0,
        },
    )
    entropy_versions: int = field(
        default=0,
        metadata={
            "help": "the bonus falls linearly to 0 over this many policy versions (0: constant)",
            "min": 0,
        },
    )

    skip_noops: bool = field(
        default=False,
        metadata={
            "help": "never imitate a step that left the screen as it was (no reward, episode "
            "went on): it cannot have helped (off: the paper keeps every filtered step)"
        },
    )
    drop_loops: bool = field(
        default=False,
        metadata={
            "help": "addition: imitate each selected episode without its detours, the steps "
            "from a screen until the same screen came back (`Trajectory.without_loops`): an "
            "action that ends where it started cannot have helped, and a greedy policy that "
            "imitates it can repeat it forever (off: every step, as the paper)"
        },
    )
    balance_tasks: bool = field(
        default=False,
        metadata={
            "help": "draw each minibatch step from a task drawn uniformly among the tasks of the "
            "imitated steps, so a task's first rare successes weigh as much as a solved task's "
            "many (off: uniform over steps, as the paper)"
        },
    )
    loss_floor: bool = field(
        default=True,
        metadata={
            "help": "score imitated actions with the agent's exploration floor mixed in, as it "
            "acts (the paper's agent has none); false (an addition): under its network's own "
            "distribution, so an action the network gives ~0 still gets a gradient (with the "
            "floor its log-prob stays near log(floor / n), where the gradient vanishes)"
        },
    )

    def updates_for(self, samples: int) -> int:
        """Actor updates this iteration for ``samples`` imitated steps: ``updates``, or fewer
        with ``max_epochs`` (at least one while anything is imitated and ``updates`` > 0)."""
        if self.max_epochs <= 0 or samples <= 0:
            return self.updates
        per_update = self.batch_size * self.grad_accum
        return min(self.updates, max(1, math.ceil(self.max_epochs * samples / per_update)))

    def lr_at(self, version: int) -> float:
        """The actor's learning rate at policy version ``version``."""
        if self.lr_versions <= 0:
            return self.lr
        done = min(1.0, version / self.lr_versions)
        return self.lr + (self.lr_final - self.lr) * done

    def entropy_weight(self, version: int) -> float:
        """The entropy bonus's weight at policy version ``version``."""
        if self.entropy_versions <= 0:
            return self.entropy_coef
        return self.entropy_coef * max(0.0, 1.0 - version / self.entropy_versions)


@dataclass
class CriticConfig:
    """The critics' size and optimisation (reference: lr 1e-4, 5 + 5 updates per iteration,
    grad-norm clip 0.01 with its batch of 4 x 32 accumulated; our clip of 1.0 suits AdamW on a
    small critic trained from scratch: Adam's step size does not scale with the gradient norm,
    so the clip only guards against spikes; the README's deviation table)."""

    lr: float = field(default=1e-4, metadata={"help": "critic learning rate (AdamW)", "gt": 0})
    batch_size: int = field(
        default=64,
        metadata={"help": "samples per critic minibatch", "min": 1, "max_key": "replay_capacity"},
    )
    instruction_updates: int = field(
        default=5, metadata={"help": "instruction-critic updates per iteration", "min": 0}
    )
    step_updates: int = field(
        default=5, metadata={"help": "step-critic updates per iteration", "min": 0}
    )
    grad_clip: float = field(
        default=1.0, metadata={"help": "gradient-norm clip (0: none)", "min": 0}
    )
    d_model: int = field(default=64, metadata={"help": "critic encoder width", "min": 1})
    n_layers: int = field(default=2, metadata={"help": "critic encoder layers", "min": 1})


@dataclass
class DigiRLConfig:
    """DigiRL's options (paper defaults: lambda 0.5, gamma 0.5, top-p 0.1)."""

    lam: float = field(
        default=0.5, metadata={"help": "lambda of the step advantage", "min": 0, "max": 1}
    )
    gamma: float = field(
        default=0.5, metadata={"help": "discount of MC-return targets", "min": 0, "max": 1}
    )
    top_p: float = field(
        default=0.1,
        metadata={
            "help": "curriculum: fraction of trajectories kept by A_instr",
            "gt": 0,
            "max": 1,
        },
    )
    advantage_sample: int = field(
        default=0,
        metadata={
            "help": "trajectories of the replay the filters rank per iteration, drawn at random "
            "(0: all of them, as the reference and Filtered BC)",
            "min": 0,
        },
    )
    step_value_target: Literal["success", "mc_return"] = field(
        default="success", metadata={"help": "label of the step critic"}
    )
    step_filter: bool = field(
        default=True, metadata={"help": "ablation: off imitates every step of kept trajectories"}
    )
    curriculum: bool = field(
        default=True, metadata={"help": "ablation: off sends every trajectory to the step filter"}
    )
    critics: bool = field(
        default=True,
        metadata={"help": "ablation: off = no critics, top-p by return, every step (Filtered BC)"},
    )
    rehearse: int = field(
        default=0,
        metadata={
            "help": "addition: per task in the sample, this many of its successes (highest "
            "A_instr first) join the curriculum, so solved tasks are not forgotten (0: the paper)",
            "min": 0,
        },
    )
    rehearse_share: float = field(
        default=0.0,
        metadata={
            "help": "addition: per task, at least this share of its successes in the sample "
            "(rounded up) joins the curriculum as rehearse does, so every instruction of a "
            "solved task stays in view, not a fixed count of them (0: only `rehearse`)",
            "min": 0,
            "max": 1,
        },
    )
    rehearse_weight: float = field(
        default=1.0,
        metadata={
            "help": "addition: how often a minibatch draws a step of a success that only "
            "rehearsal added, relative to a step the curriculum picked (1: alike)",
            "gt": 0,
            "max": 1,
        },
    )
    rehearse_pick: Literal["advantage", "random"] = field(
        default="advantage",
        metadata={
            "help": "addition: which successes rehearse adds: 'advantage' the highest A_instr "
            "(ties: the oldest, so the same few every iteration), 'random' a fresh uniform draw "
            "among the task's successes each iteration"
        },
    )
    rehearse_whole: bool = field(
        default=False,
        metadata={
            "help": "addition: the successes rehearse adds pass the step filter whole, every "
            "step imitated as Filtered BC does (false: filtered like the curriculum's). A step "
            "critic flat on a solved task gives A_step = lam^(L-h) (L: the success's length), "
            "under 1/H for the first steps of a long success, which are then never imitated"
        },
    )
    keep_demonstration_steps: bool = field(
        default=False,
        metadata={
            "help": "addition: every step of a demonstration (a trajectory whose extras name a "
            "'demonstration') skips the step filter; the curriculum still ranks it (false: the "
            "paper)"
        },
    )
    critic_warmup: int = field(
        default=0, metadata={"help": "first iterations that train only the critics", "min": 0}
    )
    heldout_every: int = field(
        default=10,
        metadata={"help": "1 in N trajectories held out of critic training (<= 1: none)", "min": 0},
    )
    actor: ActorConfig = field(default_factory=ActorConfig)
    critic: CriticConfig = field(default_factory=CriticConfig)


@dataclass
class FilteredBCConfig:
    """Filtered BC's options."""

    top_p: float = field(
        default=0.1, metadata={"help": "fraction of trajectories kept", "gt": 0, "max": 1}
    )
    actor: ActorConfig = field(default_factory=ActorConfig)
