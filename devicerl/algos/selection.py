"""A learner's data selection: a list of small steps, each a class with one job.

A `Selection` flows through the steps: the usable replay (``data``), the trajectories chosen
from it so far (``chosen``, each marked ``whole`` when every one of its steps is to be
imitated), and at the end the steps the actor imitates (``samples``). Filtered BC and DigiRL
are two lists of these steps (`devicerl.algos.filtered_bc`, `devicerl.algos.digirl`):

- `TopPByReturn` (Filtered BC): the top-p trajectories by return, never a failure;
- `Curriculum` (DigiRL, eq. 4.3): the top-p trajectories by A_instr = r_H - V_instr(c);
- `Rehearsal` (an addition): per task, some successes join the chosen ones;
- `EveryStep`: every step of the chosen trajectories;
- `StepFilter` (DigiRL, eq. 4.5): the steps whose A_step exceeds 1/H;
- `SkipNoops` (an addition): less the steps that left the screen as it was;
- `CompleteGroups`, `EpisodeAdvantages`, `StepAdvantages`, `NonZeroAdvantage`: the
  group-relative learners' (`devicerl.algos.grpo`).

A step reads critics only through the `Values` it is given, so the selection itself holds no
network and no optimizer.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from devicerl.algos.config import RehearsalConfig
from devicerl.algos.formulas import (
    filtered_bc_mask,
    instruction_advantages,
    keep_steps,
    rehearsal_mask,
    step_advantages,
    top_p_mask,
)
from devicerl.algos.group_formulas import (
    discounted_returns,
    group_advantages,
    step_group_advantages,
)
from devicerl.records import Observation, Trajectory


@dataclass
class Sample:
    """One (observation, action) pair the actor learns from: step ``index`` of ``trajectory``,
    with its ``advantage`` (1 for the regression learners, which imitate every sample alike)."""

    trajectory: Trajectory
    index: int
    advantage: float = 1.0


@dataclass
class Chosen:
    """A trajectory a selection step chose; ``whole``: every step is imitated, past any step
    filter; ``advantage``: what every one of its steps starts with (a group-relative learner's
    episode advantage; 1 for the regression learners)."""

    trajectory: Trajectory
    whole: bool = False
    advantage: float = 1.0


class Values(Protocol):
    """What selection steps ask of critics (DigiRL's `devicerl.algos.critic_fit.Critics`)."""

    def instruction_values(self, data: Sequence[Trajectory]) -> torch.Tensor:
        """V_instr(c) of each trajectory's instruction, shape (N,)."""
        ...

    def step_values(self, trajectories: Sequence[Trajectory]) -> list[torch.Tensor]:
        """V(s_h, c) of every step of each trajectory."""
        ...


@dataclass
class Selection:
    """What the steps pass along (see the module doc) and the statistics they record."""

    data: list[Trajectory]
    chosen: list[Chosen] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    stats: dict[str, float] = field(default_factory=dict)
    #: A_instr of each trajectory of ``data``, once a step computed it
    instr_advantages: torch.Tensor | None = None
    #: the whole groups a group-relative learner chose (episodes of one group each)
    groups: list[list[Trajectory]] = field(default_factory=list)


def success_of(data: Sequence[Trajectory]) -> torch.Tensor:
    """r_H of each trajectory: 1 for a success, else 0."""
    return torch.tensor([1.0 if t.success else 0.0 for t in data])


def horizon(t: Trajectory, default: int = 10) -> int:
    """The task's step budget H (recorded by the pool), for DigiRL's 1/H threshold."""
    return int(t.max_steps or max(default, t.length))


@dataclass
class TopPByReturn:
    """Filtered BC's choice: the top-p trajectories by return, ties kept, never a failure."""

    top_p: float

    def __call__(self, sel: Selection) -> Selection:
        returns = torch.tensor([t.total_reward for t in sel.data], dtype=torch.float32)
        mask = filtered_bc_mask(returns, self.top_p).tolist()
        sel.chosen = [Chosen(t) for t, k in zip(sel.data, mask) if k]
        return sel


@dataclass
class Curriculum:
    """DigiRL's instruction-level curriculum: the top-p trajectories by
    A_instr = r_H - V_instr(c)."""

    top_p: float
    values: Values

    def __call__(self, sel: Selection) -> Selection:
        v_instr = self.values.instruction_values(sel.data)
        a_instr = instruction_advantages(success_of(sel.data), v_instr)
        sel.instr_advantages = a_instr
        mask = top_p_mask(a_instr, self.top_p).tolist()
        sel.chosen = [Chosen(t) for t, k in zip(sel.data, mask) if k]
        sel.stats["train/v_instr_mean"] = float(v_instr.mean()) if len(sel.data) else math.nan
        sel.stats["train/a_instr_mean"] = float(a_instr.mean()) if len(sel.data) else math.nan
        return sel


@dataclass
class Rehearsal:
    """Per task in the data, its ``per_task`` successes (at least a ``share`` of them) join the
    chosen trajectories: by the highest A_instr, or drawn afresh each iteration (``pick``);
    with ``whole`` every step of each rehearsed success is imitated."""

    config: RehearsalConfig
    rng: random.Random

    def __call__(self, sel: Selection) -> Selection:
        cfg = self.config
        if cfg.pick == "random":
            scores = torch.tensor([self.rng.random() for _ in sel.data])
        elif sel.instr_advantages is not None:
            scores = sel.instr_advantages
        else:
            raise ValueError("rehearsal by advantage needs a curriculum before it")
        tasks = [t.task for t in sel.data]
        mask = rehearsal_mask(tasks, success_of(sel.data), scores, cfg.per_task, cfg.share or 0.0)
        rehearsed = {id(t) for t, k in zip(sel.data, mask.tolist()) if k}
        already = {id(c.trajectory) for c in sel.chosen}
        # one mask over the data, in its order; every rehearsed success is whole with `whole`
        sel.chosen = [
            Chosen(t, whole=cfg.whole and id(t) in rehearsed)
            for t in sel.data
            if id(t) in already or id(t) in rehearsed
        ]
        return sel


class EveryTrajectory:
    """Every trajectory of the data is chosen (DigiRL without its curriculum)."""

    def __call__(self, sel: Selection) -> Selection:
        sel.chosen = [Chosen(t) for t in sel.data]
        return sel


class EveryStep:
    """Every step of each chosen trajectory."""

    def __call__(self, sel: Selection) -> Selection:
        sel.samples = [
            Sample(c.trajectory, i, c.advantage)
            for c in sel.chosen
            for i in range(c.trajectory.length)
        ]
        return sel


@dataclass
class StepFilter:
    """DigiRL's step filter: the steps of the chosen trajectories whose
    A_step = lam^(H-h) r_H + (1 - lam^(H-h) r_H) (V(s_{h+1}) + r_h - V(s_h)) exceeds 1/H
    (every step of a trajectory chosen ``whole``)."""

    lam: float
    values: Values

    def advantages(self, t: Trajectory, values: torch.Tensor) -> torch.Tensor:
        """A_step of every step of ``t`` from its step values (after the last step: 0)."""
        nxt = torch.cat([values[1:], torch.zeros(1)])
        rewards = torch.tensor([s.reward for s in t.steps], dtype=torch.float32)
        return step_advantages(values, nxt, rewards, 1.0 if t.success else 0.0, self.lam)

    def __call__(self, sel: Selection) -> Selection:
        sel.samples = []
        if not sel.chosen:
            sel.stats["train/a_step_mean"] = 0.0
            return sel
        per_traj = self.values.step_values([c.trajectory for c in sel.chosen])
        all_adv, spreads = [], []
        for c, v in zip(sel.chosen, per_traj):
            t = c.trajectory
            adv = self.advantages(t, v)
            all_adv.append(adv)
            spreads.append(float(v.max() - v.min()))
            keep = (
                torch.ones(t.length, dtype=torch.bool) if c.whole else keep_steps(adv, horizon(t))
            )
            sel.samples.extend(Sample(t, i) for i in range(t.length) if keep[i])
        sel.stats["train/a_step_mean"] = float(torch.cat(all_adv).mean())
        sel.stats["train/step_value_spread"] = sum(spreads) / len(spreads)
        return sel


class SkipNoops:
    """Less the samples whose step changed nothing (`Trajectory.is_noop`)."""

    def __call__(self, sel: Selection) -> Selection:
        kept = [s for s in sel.samples if not s.trajectory.is_noop(s.index)]
        sel.stats["train/actor_noops_skipped"] = float(len(sel.samples) - len(kept))
        sel.samples = kept
        return sel


def group_of(t: Trajectory) -> str | None:
    """The id of the group an episode was planned in (None: not in one)."""
    return t.plan.group if t.plan is not None else None


@dataclass
class CompleteGroups:
    """The trajectories of the groups that are whole (``group_size`` labelled episodes, the
    newest ones when the replay holds more) and fresh: a group whose oldest step was acted
    ``max_staleness`` or more versions before ``version()`` is left out. Counted: groups used,
    incomplete and stale; the mean staleness of the groups used."""

    group_size: int
    max_staleness: int | None
    version: Callable[[], int]

    def __call__(self, sel: Selection) -> Selection:
        groups: dict[str, list[Trajectory]] = {}
        for t in sel.data:
            g = group_of(t)
            if g is not None:
                groups.setdefault(g, []).append(t)
        now, used, stale, incomplete, lags = self.version(), [], 0, 0, []
        for members in groups.values():
            if len(members) < self.group_size:
                incomplete += 1
                continue
            members = members[-self.group_size :]
            lag = now - min(t.policy_version for t in members)
            if self.max_staleness is not None and lag >= self.max_staleness:
                stale += 1
                continue
            used.append(members)
            lags.append(lag)
        sel.groups = used
        sel.chosen = [Chosen(t) for members in used for t in members]
        sel.stats.update(
            {
                "train/groups": float(len(used)),
                "train/groups_incomplete": float(incomplete),
                "train/groups_stale": float(stale),
                "train/staleness_mean": sum(lags) / len(lags) if lags else math.nan,
            }
        )
        return sel


@dataclass
class EpisodeAdvantages:
    """GRPO's episode advantage: each chosen episode's return against its group's
    (`devicerl.algos.group_formulas.group_advantages`). Counted: the groups whose returns are
    all equal (their advantages are all 0: nothing to learn from them)."""

    normalise: bool

    def __call__(self, sel: Selection) -> Selection:
        advantage: dict[int, float] = {}
        uniform = 0
        for members in sel.groups:
            returns = torch.tensor([t.total_reward for t in members], dtype=torch.float32)
            uniform += int(bool((returns == returns[0]).all()))
            for t, a in zip(members, group_advantages(returns, self.normalise).tolist()):
                advantage[id(t)] = a
        sel.chosen = [
            Chosen(c.trajectory, c.whole, advantage[id(c.trajectory)]) for c in sel.chosen
        ]
        sel.stats["train/groups_uniform"] = float(uniform)
        return sel


def anchor_key(obs: Observation) -> tuple[Any, ...]:
    """An exact key of the screen state an agent reads: instruction, elements and pixels."""
    elements = tuple(
        (e.id, e.role, e.text, e.value, tuple(e.bbox), e.clickable, e.focused, e.editable)
        for e in obs.elements
    )
    pixels = None
    if obs.screenshot is not None:
        pixels = hashlib.sha1(np.ascontiguousarray(obs.screenshot).data).hexdigest()
    return (obs.instruction, elements, pixels)


@dataclass
class StepAdvantages:
    """GiGPO's step-level advantage, added to each sample's episode advantage: the steps of a
    group whose observations are identical (`anchor_key`) form a step group, and each step's
    discounted return is compared within it (`devicerl.algos.group_formulas.step_group_advantages`)
    and added with weight 1, the paper's omega. Counted: the share of steps in a
    step group of two or more."""

    gamma: float
    normalise: bool

    def __call__(self, sel: Selection) -> Selection:
        bonus: dict[tuple[int, int], float] = {}
        shared = total = 0
        for members in sel.groups:
            keys = [[anchor_key(s.observation) for s in t.steps] for t in members]
            returns = [
                discounted_returns(torch.tensor([s.reward for s in t.steps]), self.gamma)
                for t in members
            ]
            counts: dict[Any, int] = {}
            for episode in keys:
                for k in episode:
                    counts[k] = counts.get(k, 0) + 1
            step_adv = step_group_advantages(keys, returns, self.normalise)
            for t, episode, adv in zip(members, keys, step_adv):
                total += len(episode)
                shared += sum(counts[k] > 1 for k in episode)
                for i, a in enumerate(adv.tolist()):
                    bonus[(id(t), i)] = a
        for s in sel.samples:
            s.advantage += bonus.get((id(s.trajectory), s.index), 0.0)
        sel.stats["train/step_groups_frac"] = shared / total if total else math.nan
        return sel


class NonZeroAdvantage:
    """Less the samples whose advantage is 0 (they move no parameter)."""

    def __call__(self, sel: Selection) -> Selection:
        sel.samples = [s for s in sel.samples if s.advantage != 0.0]
        return sel


def run_steps(
    steps: Sequence[Callable[[Selection], Selection]], data: list[Trajectory]
) -> Selection:
    """Run ``steps`` in order over ``data``; the statistics every learner logs are added."""
    sel = Selection(list(data))
    for step in steps:
        sel = step(sel)
    sel.stats.update(selection_stats(sel))
    return sel


def selection_stats(sel: Selection) -> dict[str, float]:
    """How much of the data the selection kept, and how much of it failed."""
    chosen = [c.trajectory for c in sel.chosen]
    steps_in = sum(t.length for t in chosen)
    success_steps = sum(t.length for t in chosen if t.success)
    samples = sel.samples
    return {
        "train/kept_trajectories": float(len(chosen)),
        "train/kept_steps": float(len(samples)),
        "train/curriculum_kept_frac": len(chosen) / len(sel.data) if sel.data else math.nan,
        "train/step_filter_kept_frac": len(samples) / steps_in if steps_in else math.nan,
        # imitated actions of failed episodes: where a critic's error becomes the policy's
        "train/kept_steps_failed_frac": (
            sum(not s.trajectory.success for s in samples) / len(samples) if samples else math.nan
        ),
        # steps of kept successes left out: with a flat step critic, a success's first steps
        "train/success_steps_dropped_frac": (
            1.0 - sum(s.trajectory.success for s in samples) / success_steps
            if success_steps
            else math.nan
        ),
    }
