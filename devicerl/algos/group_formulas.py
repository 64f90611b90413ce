"""The math of the group-relative learners as pure functions over tensors.

GRPO (Shao et al., arXiv 2402.03300): G episodes of one task instance form a group; each
episode's advantage is its return against the group's, A_i = (R_i - mean(R)) / (std(R) + eps),
or with ``normalise=False`` (Dr. GRPO, Liu et al., arXiv 2503.20783) A_i = R_i - mean(R). Every
step of episode i takes A_i.

GiGPO (Feng et al., arXiv 2505.10978, eqs. 3-7): within a group, the steps whose observations
are identical ("anchor states") form step groups; a step's discounted return from there,
R_t = sum_k gamma^k r_{t+k}, is compared within its step group as above, and its advantage is
A = A^E(episode) + omega * A^S(step). A step alone in its step group has A^S = 0.

The objective is PPO's clipped surrogate with AReaL's decoupling (Fu et al., arXiv 2505.24298):
the importance ratio r = pi_theta / pi_prox is taken against the proximal policy pi_prox (the
policy when the iteration's update began), clipped to [1 - clip, 1 + clip], and the whole term is
weighted by pi_prox / mu, the ratio of the proximal to the behaviour policy that acted (its log-
prob recorded with each step), capped at ``weight_cap``. On fresh data pi_prox = mu and it is
PPO's objective.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch


def group_advantages(returns: torch.Tensor, normalise: bool = True, eps: float = 1e-6):
    """A_i = (R_i - mean R) / (std R + eps) over one group (population std), or R_i - mean R
    without ``normalise``; all zeros when every return is equal."""
    centred = returns - returns.mean()
    if not normalise:
        return centred
    return centred / (returns.std(unbiased=False) + eps)


def discounted_returns(rewards: torch.Tensor, gamma: float) -> torch.Tensor:
    """R_t = sum_{k>=0} gamma^k r_{t+k} of one episode (1-D)."""
    out = torch.zeros_like(rewards, dtype=torch.float32)
    running = 0.0
    for t in range(rewards.shape[0] - 1, -1, -1):
        running = float(rewards[t]) + gamma * running
        out[t] = running
    return out


def step_group_advantages(
    keys: Sequence[Sequence[Hashable]],
    returns: Sequence[torch.Tensor],
    normalise: bool = True,
    eps: float = 1e-6,
) -> list[torch.Tensor]:
    """A^S of every step of every episode of a group: ``keys[i][t]`` is the anchor-state key of
    step t of episode i, ``returns[i][t]`` its discounted return. Steps sharing a key (across
    episodes and within one) form a step group; each step's return is compared within it
    (`group_advantages`); a step alone in its group gets 0."""
    members: dict[Hashable, list[tuple[int, int]]] = {}
    for i, episode in enumerate(keys):
        for t, key in enumerate(episode):
            members.setdefault(key, []).append((i, t))
    out = [torch.zeros(len(episode)) for episode in keys]
    for where in members.values():
        if len(where) < 2:
            continue
        values = torch.tensor([float(returns[i][t]) for i, t in where])
        for (i, t), a in zip(where, group_advantages(values, normalise, eps).tolist()):
            out[i][t] = a
    return out


def clipped_surrogate(
    logp: torch.Tensor,
    logp_prox: torch.Tensor,
    logp_behaviour: torch.Tensor,
    advantages: torch.Tensor,
    clip: float,
    weight_cap: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-sample loss of the decoupled clipped objective (see the module doc):
    - (pi_prox / mu) * min(r A, clip(r, 1 - clip, 1 + clip) A), r = pi_theta / pi_prox.
    Returns (loss, r, clipped) where ``clipped`` marks the samples the clip held."""
    ratio = torch.exp(logp - logp_prox.detach())
    weight = torch.exp(logp_prox.detach() - logp_behaviour).clamp(max=weight_cap)
    unclipped = ratio * advantages
    bounded = ratio.clamp(1.0 - clip, 1.0 + clip) * advantages
    loss = -weight * torch.minimum(unclipped, bounded)
    return loss, ratio.detach(), (bounded < unclipped).detach()


def kl_k3(logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi_theta || pi_ref) on actions sampled from pi_theta:
    exp(d) - d - 1 with d = log pi_ref - log pi_theta (non-negative, unbiased)."""
    d = logp_ref.detach() - logp
    return torch.exp(d) - d - 1.0
