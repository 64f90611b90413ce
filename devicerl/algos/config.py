"""The learners' options, apart from their torch code (loading a config or printing
`devicerl train --help` imports no torch).

A learner is a selection of data (`devicerl.algos.selection`) and loss parts (the actor's
regression, DigiRL's critics); each part takes its own options from here. Defaults follow the
DigiRL paper and its repository; each option beyond the paper says so in its help text and is
listed once in docs/training.md ("Additions beyond the paper").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass
class EntropyConfig:
    """An entropy bonus on states drawn from the whole replay (an addition: the paper's actor
    is a pure regression)."""

    coef: float = field(default=0.1, metadata={"help": "weight of the bonus", "gt": 0})
    fade_versions: int | None = field(
        default=None,
        metadata={
            "help": "the weight falls linearly to 0 over this many policy versions (null: "
            "constant)",
            "min": 1,
        },
    )

    def weight(self, version: int) -> float:
        """The bonus's weight at policy version ``version``."""
        if self.fade_versions is None:
            return self.coef
        return self.coef * max(0.0, 1.0 - version / self.fade_versions)


@dataclass
class ActorConfig:
    """The actor's regression: weighted log-likelihood of the selected steps (DigiRL's
    advantage-filtered regression, Filtered BC's behaviour cloning)."""

    lr: float = field(default=1e-4, metadata={"help": "learning rate (AdamW)", "gt": 0})
    updates: int = field(default=20, metadata={"help": "optimizer steps per iteration", "min": 0})
    batch_size: int = field(default=64, metadata={"help": "steps per minibatch", "min": 1})
    grad_accum: int = field(
        default=1, metadata={"help": "minibatches per optimizer step", "min": 1}
    )
    grad_clip: float | None = field(
        default=1.0, metadata={"help": "gradient-norm clip (null: none)", "gt": 0}
    )
    entropy: EntropyConfig | None = field(
        default=None,
        metadata={
            "help": "addition: an entropy bonus (null: none, as the paper; needs an "
            "agent with entropy())"
        },
    )
    skip_noops: bool = field(
        default=False,
        metadata={
            "help": "addition: never imitate a step that left the screen as it was (no reward, "
            "episode went on): it cannot have helped (false: every selected step, as the paper)"
        },
    )
    loss_floor: bool = field(
        default=True,
        metadata={
            "help": "score imitated actions with the agent's exploration floor mixed in, as it "
            "acts; false (an addition): under its network's own distribution, so an action the "
            "network gives ~0 still gets a gradient"
        },
    )


@dataclass
class CriticConfig:
    """DigiRL's two critics (reference: lr 1e-4, 5 + 5 updates per iteration, grad-norm clip
    0.01 on its batch of 4 x 32; our clip of 1.0 suits AdamW on a small critic trained from
    scratch)."""

    lr: float = field(default=1e-4, metadata={"help": "learning rate (AdamW)", "gt": 0})
    batch_size: int = field(default=64, metadata={"help": "samples per minibatch", "min": 1})
    instruction_updates: int = field(
        default=5, metadata={"help": "instruction-critic updates per iteration", "min": 0}
    )
    step_updates: int = field(
        default=5, metadata={"help": "step-critic updates per iteration", "min": 0}
    )
    grad_clip: float | None = field(
        default=1.0, metadata={"help": "gradient-norm clip (null: none)", "gt": 0}
    )
    d_model: int = field(default=64, metadata={"help": "critic encoder width", "min": 1})


@dataclass
class RehearsalConfig:
    """An addition to DigiRL's curriculum: per task, some of its successes join the selection,
    so a solved task (whose successes have A_instr near 0) is not forgotten."""

    per_task: int = field(
        default=2, metadata={"help": "successes per task in the replay that join", "min": 1}
    )
    share: float | None = field(
        default=None,
        metadata={
            "help": "at least this share of each task's successes (rounded up) join, when that "
            "is more than per_task (null: per_task only)",
            "gt": 0,
            "max": 1,
        },
    )
    pick: Literal["advantage", "random"] = field(
        default="advantage",
        metadata={
            "help": "advantage: the highest A_instr (ties: the oldest); random: a fresh uniform "
            "draw among the task's successes each iteration"
        },
    )
    whole: bool = field(
        default=False,
        metadata={
            "help": "the rehearsed successes pass the step filter whole (false: filtered like "
            "the curriculum's picks)"
        },
    )


@dataclass
class DigiRLConfig:
    """DigiRL's selection (paper defaults: lambda 0.5, top-p 0.1)."""

    top_p: float = field(
        default=0.1,
        metadata={"help": "curriculum: share of trajectories kept by A_instr", "gt": 0, "max": 1},
    )
    lam: float = field(
        default=0.5, metadata={"help": "lambda of the step advantage", "min": 0, "max": 1}
    )
    rehearsal: RehearsalConfig | None = field(
        default=None, metadata={"help": "addition: rehearse solved tasks (null: off, as the paper)"}
    )
    critic_warmup: int = field(
        default=0, metadata={"help": "first iterations that train only the critics", "min": 0}
    )


@dataclass
class FilteredBCConfig:
    """Filtered BC's selection."""

    top_p: float = field(
        default=0.1, metadata={"help": "share of trajectories kept by return", "gt": 0, "max": 1}
    )
