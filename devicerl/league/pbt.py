"""Population-based training (arXiv 1711.09846) of one league policy.

``population`` copies of a policy learn side by side, each with its own hyperparameters
(`devicerl.league.hparams`: actor lr, top-p, exploration). Every ``interval`` iterations the
bottom ``quantile`` of the population (by windowed success) takes the weights and
hyperparameters of a random member of the top quantile (exploit) and then changes each
hyperparameter (perturb; the paper's "explore"): with ``resample_probability`` a fresh draw
from its range, else its value times 0.8 or 1.2. Defaults and quantile sizes follow Ray Tune's
`PopulationBasedTraining`.

Weights are copied by value (`get_weights` returns fresh tensors); the members' optimiser state
is the trainer's: a history entry ``{"event": "exploit", ...}`` tells it which learner to reset.
"""

from __future__ import annotations

import copy
import math
import random
from typing import Any

from devicerl.errors import ConfigError
from devicerl.league.config import (
    PBT_PERTURBATION,
    PBT_QUANTILE,
    PBT_RANGES,
    PBT_RESAMPLE,
    PBTConfig,
)
from devicerl.league.hparams import apply_to_policy, get_hparams, set_hparams
from devicerl.league.state import League


def quantiles(ranked: list[str], quantile: float) -> tuple[list[str], list[str]]:
    """(bottom, top) of ``ranked`` (worst first), each ``ceil(n q)`` long but at most n/2."""
    if len(ranked) <= 1:
        return [], []
    k = min(math.ceil(len(ranked) * quantile), len(ranked) // 2)
    if k < 1:
        return [], []
    return ranked[:k], ranked[-k:]


class PBT:
    """Drives one policy's population inside a `League`."""

    def __init__(self, league: League, config: PBTConfig, seed: int = 0) -> None:
        if config.policy not in league:
            raise ConfigError(f"league.pbt.policy: unknown policy {config.policy!r}")
        self.league = league
        self.config = config
        self.rng = random.Random(seed)
        self.members: list[str] = []

    @property
    def names(self) -> list[str]:
        return list(PBT_RANGES)

    def populate(self) -> list[str]:
        """Member 0 is the policy itself (its configured hyperparameters); the other
        ``population - 1`` are deep copies with hyperparameters drawn from their ranges, mapped
        to the same tasks with the same weights, so episodes split evenly."""
        base = self.league[self.config.policy]
        self.members = [base.name]
        rules = [r for r in self.league.mapping.rules if r.policy == base.name]
        for i in range(1, self.config.population):
            name = f"{base.name}.pbt{i}"
            spec = copy.deepcopy(base.spec)
            set_hparams(spec, {n: self._resample(n) for n in self.names})
            policy = copy.deepcopy(base.policy)
            apply_to_policy(policy, spec)
            self.league.add_member(
                name, spec, policy, parent=base.name, teachers=list(base.teachers)
            )
            for rule in rules:
                self.league.add_rule(name, rule.tasks, rule.weight)
            self.members.append(name)
        return list(self.members)

    def _resample(self, name: str) -> float:
        low, high = PBT_RANGES[name]
        if low > 0 and high / low > 10:  # spans decades (a learning rate): log-uniform
            return math.exp(self.rng.uniform(math.log(low), math.log(high)))
        return self.rng.uniform(low, high)

    def perturb(self, values: dict[str, float]) -> dict[str, float]:
        """Resample (probability ``resample_probability``) or perturb each hyperparameter."""
        out = {}
        for name, value in values.items():
            if self.rng.random() < PBT_RESAMPLE:
                out[name] = self._resample(name)
            else:
                out[name] = value * self.rng.choice(list(PBT_PERTURBATION))
        return out

    def scores(self) -> dict[str, float]:
        """Each member's windowed success (a member with no episodes yet scores 0)."""
        return {m: self.league.success.policy_rate(m)[0] or 0.0 for m in self.members}

    def exploit(self, target: str, donor: str) -> dict[str, Any]:
        """``target`` takes ``donor``'s weights (copied, not shared) and hyperparameters, then
        perturbs them; its success windows become the donor's."""
        dst, src = self.league[target], self.league[donor]
        dst.policy.set_weights(src.policy.get_weights(), version=dst.policy.version + 1)
        donor_values = get_hparams(src.spec, self.names)
        set_hparams(dst.spec, donor_values)
        perturbed = self.perturb(donor_values)
        set_hparams(dst.spec, perturbed)
        apply_to_policy(dst.policy, dst.spec)
        self.league.success.copy_policy(donor, target)
        self.league.since_snapshot[target] = 0
        event = {
            "event": "exploit", "iteration": self.league.iteration, "target": target,
            "donor": donor, "donor_hparams": donor_values,
            "hparams": get_hparams(dst.spec, self.names),
        }  # fmt: skip
        self.league.history.append(event)
        return event

    def step(self, scores: dict[str, float] | None = None) -> list[dict[str, Any]]:
        """At every ``interval``-th league iteration, the bottom quantile exploits the top one.
        Returns the exploit events (none between intervals)."""
        if not self.members or self.league.iteration % self.config.interval:
            return []
        scores = scores if scores is not None else self.scores()
        ranked = sorted(self.members, key=lambda m: (scores[m], m))
        bottom, top = quantiles(ranked, PBT_QUANTILE)
        return [self.exploit(m, self.rng.choice(top)) for m in bottom]

    def to_json(self) -> dict[str, Any]:
        return {"members": list(self.members), "rng": _rng_state(self.rng)}

    def load_json(self, data: dict[str, Any]) -> None:
        self.members = [str(m) for m in data["members"]]
        self.rng.setstate(_rng_from(data["rng"]))


def _rng_state(rng: random.Random) -> list[Any]:
    version, state, gauss = rng.getstate()
    return [version, list(state), gauss]


def _rng_from(data: list[Any]) -> tuple[Any, ...]:
    return (data[0], tuple(data[1]), data[2])
