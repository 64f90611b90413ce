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

from devicerl.errors import ConfigError


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
    batch_size: int = field(
        default=64,
        metadata={"help": "steps per minibatch", "min": 1, "max_key": "replay_capacity"},
    )
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
    0.01 on its batch of 4 x 32; our clip of 1.0, `devicerl.algos.critic_fit.GRAD_CLIP`, suits
    AdamW on a small critic trained from scratch)."""

    lr: float = field(default=1e-4, metadata={"help": "learning rate (AdamW)", "gt": 0})
    batch_size: int = field(
        default=64,
        metadata={"help": "samples per minibatch", "min": 1, "max_key": "replay_capacity"},
    )
    updates: int = field(
        default=5,
        metadata={"help": "updates of each critic (instruction, step) per iteration", "min": 0},
    )
    d_model: int = field(default=64, metadata={"help": "critic encoder width", "min": 1})


@dataclass
class RehearsalConfig:
    """The ``rehearsal`` step (an addition to DigiRL's curriculum): per task, some of its
    successes join the selection, so a solved task (whose successes have A_instr near 0) is not
    forgotten."""

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


#: DigiRL's selection steps, in the order they may be listed (`devicerl.algos.selection`).
DIGIRL_STEPS = ("curriculum", "rehearsal", "step_filter", "skip_noops")
#: Filtered BC's.
FILTERED_BC_STEPS = ("top_p_by_return", "skip_noops")


def _check_steps(key: str, steps: list[str], order: tuple[str, ...]) -> None:
    """Steps listed once each, in ``order``."""
    if len(set(steps)) != len(steps) or steps != sorted(steps, key=order.index):
        raise ConfigError(f"{key}: {steps}: each step once, in the order {list(order)}")


@dataclass
class DigiRLConfig:
    """DigiRL's selection (paper defaults: lambda 0.5, top-p 0.1). ``selection`` lists its steps
    in order: the paper's is [curriculum, step_filter]; without the curriculum every trajectory
    goes to the step filter, without the step filter every step of the chosen trajectories is
    imitated (the ablations); ``rehearsal`` and ``skip_noops`` are additions."""

    selection: list[Literal["curriculum", "rehearsal", "step_filter", "skip_noops"]] = field(
        default_factory=lambda: ["curriculum", "step_filter"],
        metadata={
            "help": "selection steps in order: curriculum (top-p by A_instr), rehearsal "
            "(addition: solved tasks' successes join), step_filter (A_step > 1/H), skip_noops "
            "(addition: never imitate a step that left the screen as it was)"
        },
    )
    top_p: float = field(
        default=0.1,
        metadata={"help": "curriculum: share of trajectories kept by A_instr", "gt": 0, "max": 1},
    )
    lam: float = field(
        default=0.5, metadata={"help": "lambda of the step advantage", "min": 0, "max": 1}
    )
    rehearsal: RehearsalConfig = field(default_factory=RehearsalConfig)
    critic_warmup: int = field(
        default=0, metadata={"help": "first iterations that train only the critics", "min": 0}
    )

    def validate(self) -> None:
        steps = list(self.selection)
        _check_steps("digirl.selection", steps, DIGIRL_STEPS)
        if (
            "rehearsal" in steps
            and self.rehearsal.pick == "advantage"
            and "curriculum" not in steps
        ):
            raise ConfigError("digirl.rehearsal.pick=advantage ranks by A_instr: list curriculum")


@dataclass
class FilteredBCConfig:
    """Filtered BC's selection: the paper's is [top_p_by_return] (every step of the top-p
    trajectories by return); ``skip_noops`` is an addition."""

    selection: list[Literal["top_p_by_return", "skip_noops"]] = field(
        default_factory=lambda: ["top_p_by_return"],
        metadata={"help": "selection steps in order: top_p_by_return, skip_noops (addition)"},
    )
    top_p: float = field(
        default=0.1, metadata={"help": "share of trajectories kept by return", "gt": 0, "max": 1}
    )

    def validate(self) -> None:
        steps = list(self.selection)
        _check_steps("filtered_bc.selection", steps, FILTERED_BC_STEPS)
        if "top_p_by_return" not in steps:
            raise ConfigError("filtered_bc.selection: top_p_by_return is what Filtered BC is")


#: Iterations the trainer waits for a group's last members before it drops the group whole
#: (`devicerl.runtime.loop.task_groups`); a group must be able to arrive within them.
GROUP_MAX_AGE = 8


@dataclass
class GRPOConfig:
    """The group-relative learners (GRPO, and GiGPO with `GiGPOConfig`): groups of episodes of
    one task instance, each episode's return against its group's, a clipped surrogate
    (defaults as DeepSeekMath's GRPO: clip 0.2, std-normalised advantages, a KL penalty of
    0.04 to the start policy; verl-agent's group size 8)."""

    group_size: int = field(
        default=8, metadata={"help": "episodes of one task instance per group", "min": 2}
    )
    clip: float = field(
        default=0.2, metadata={"help": "PPO clip range of the importance ratio", "gt": 0, "lt": 1}
    )
    normalise: bool = field(
        default=True,
        metadata={"help": "divide advantages by the group's std (false: Dr. GRPO, mean only)"},
    )
    kl_coef: float | None = field(
        default=0.04,
        metadata={"help": "weight of a KL penalty to the start policy (null: none)", "gt": 0},
    )
    max_staleness: int | None = field(
        default=4,
        metadata={
            "help": "groups acted this many policy versions before the learner's or earlier "
            "are left out (null: no bound)",
            "min": 1,
        },
    )


@dataclass
class GiGPOConfig:
    """GiGPO's step-level groups (arXiv 2505.10978: gamma 0.95; the step advantage's weight
    omega is the paper's 1)."""

    gamma: float = field(
        default=0.95,
        metadata={
            "help": "discount of the step returns compared in a step group",
            "min": 0,
            "max": 1,
        },
    )
