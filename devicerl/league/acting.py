"""Inference batched per policy: the league's half of the collector's ``_act``.

The collector holds the observations of every ready device; in a league each device's episode
belongs to one policy (`League.assign` at the episode's first step). `act_per_policy` groups the
observations by policy and makes one batched `act` call per policy, so N devices cost one
forward pass per policy in use, not one per device, and each sample records which policy (and
version) chose it.
"""

from __future__ import annotations

from collections.abc import Mapping

from devicerl.agents.base import ActionSample, Policy
from devicerl.errors import ConfigError
from devicerl.league.state import League
from devicerl.records import Observation

#: Key of the acting policy's name in ``ActionSample.extras`` (and the trajectory's extras).
POLICY_KEY = "policy"


def group_by_policy(assignments: Mapping[int, str]) -> dict[str, list[int]]:
    """Device ids per policy, in the order the devices were given."""
    groups: dict[str, list[int]] = {}
    for env_id, policy in assignments.items():
        groups.setdefault(policy, []).append(env_id)
    return groups


def act_per_policy(
    league: League | Mapping[str, Policy],
    observations: Mapping[int, Observation],
    assignments: Mapping[int, str],
    greedy: bool = False,
) -> dict[int, ActionSample]:
    """One `act` call per policy over its ready devices; every sample's extras name the policy
    and its version. ``league`` is the `League` or, in a collector, its acting copies by name.
    A device without an assignment, or assigned a policy that has left the league, is an error
    naming it."""
    policies = (
        {n: m.policy for n, m in league.members.items()} if isinstance(league, League) else league
    )
    missing = [i for i in observations if i not in assignments]
    if missing:
        raise ConfigError(f"device {missing[0]}: its episode has no policy")
    out: dict[int, ActionSample] = {}
    for policy, ids in group_by_policy({i: assignments[i] for i in observations}).items():
        if policy not in policies:
            raise ConfigError(f"device {ids[0]}: policy {policy!r} is not in the league")
        acting = policies[policy]
        samples = acting.act([observations[i] for i in ids], greedy=greedy)
        if len(samples) != len(ids):
            raise ValueError(f"{policy}: {len(samples)} actions for {len(ids)} observations")
        for env_id, sample in zip(ids, samples):
            sample.extras[POLICY_KEY] = policy
            sample.extras["policy_version"] = acting.version
            out[env_id] = sample
    return out
