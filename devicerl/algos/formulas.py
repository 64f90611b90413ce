"""The math of Filtered BC and DigiRL as pure functions over tensors (no models, no processes).

Notation follows the DigiRL paper (arXiv 2406.11896, eqs. 4.2-4.6): a trajectory has steps
h = 1..H with rewards r_h in {0, 1} (sparse: only the solving step is 1) and final reward r_H.

Choices where the paper leaves room (documented in docs/learning.md):
- In the step advantage, H is the trajectory's own length, so the last step carries the full
  final reward (lambda^0 = 1); the keep threshold 1/H uses the task's horizon (its step budget),
  so a 1-step success is kept (A = 1 > 1/horizon).
- The value of the state after the last step is 0 (the episode is over, whatever the outcome).
- Filtered BC never keeps a zero-return trajectory: when fewer than top-p of the trajectories
  succeed, it keeps only the successful ones; when none succeeds, it keeps nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F


def step_advantages(
    values: torch.Tensor,
    next_values: torch.Tensor,
    rewards: torch.Tensor,
    final_reward: float,
    lam: float,
) -> torch.Tensor:
    """DigiRL's step-level advantage for one trajectory of length H (1-D tensors of length H):

    A_h = lam^(H-h) r_H + (1 - lam^(H-h) r_H) (V(s_{h+1}) + r_h - V(s_h)),  h = 1..H.
    """
    H = values.shape[0]
    h = torch.arange(1, H + 1, dtype=torch.float32)
    w = (lam ** (H - h)) * float(final_reward)
    return w + (1.0 - w) * (next_values + rewards - values)


def keep_steps(advantages: torch.Tensor, horizon: int) -> torch.Tensor:
    """Boolean mask of the actions DigiRL trains on: A_step > 1/horizon."""
    return advantages > 1.0 / horizon


def instruction_advantages(final_rewards: torch.Tensor, instr_values: torch.Tensor) -> torch.Tensor:
    """A_instr(c) = r_H - V_instr(c), one value per trajectory."""
    return final_rewards - instr_values


def top_p_mask(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    """Mask of the top ``ceil(top_p * N)`` entries by score (ties at the cut-off are kept)."""
    n = scores.shape[0]
    if n == 0:
        return torch.zeros(0, dtype=torch.bool)
    k = max(1, math.ceil(top_p * n))
    cutoff = torch.topk(scores, k).values.min()
    return scores >= cutoff


def rehearsal_mask(
    tasks: Sequence[str],
    successes: torch.Tensor,
    scores: torch.Tensor,
    per_task: int,
    share: float = 0.0,
) -> torch.Tensor:
    """For each task, its ``per_task`` successful trajectories with the highest ``scores``, or
    ``ceil(share * n)`` of its ``n`` successes when that is more (an addition to the
    curriculum: a solved task, whose successes have A_instr near 0, is otherwise left out of
    every update and forgotten)."""
    mask = torch.zeros(len(tasks), dtype=torch.bool)
    by_task: dict[str, list[int]] = {}
    for i, (task, ok) in enumerate(zip(tasks, successes.tolist())):
        if ok > 0:
            by_task.setdefault(task, []).append(i)
    for rows in by_task.values():
        rows.sort(key=lambda i: -float(scores[i]))
        mask[rows[: max(per_task, math.ceil(share * len(rows)))]] = True
    return mask


def filtered_bc_mask(returns: torch.Tensor, top_p: float) -> torch.Tensor:
    """Filtered BC: keep the top-p trajectories by return, never one with return <= 0.

    When fewer than ``ceil(top_p * N)`` trajectories succeed, only the successful ones are kept
    (the reference's cut-off of 0 kept every failure too); when none succeeds, none is kept.
    """
    return top_p_mask(returns, top_p) & (returns > 0)


def value_bce(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of a value head (logits) against success labels in [0, 1]."""
    return F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype))


def two_head_bce(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy for a two-head step critic: ``logits`` is (N, 2); both heads learn."""
    t = targets.to(logits.dtype).unsqueeze(-1).expand_as(logits)
    return F.binary_cross_entropy_with_logits(logits, t)
