"""Which policy plays a new episode: task-glob rules, weighted when several match.

RLlib maps agents to policies with a function fixed at build time; here a rule list is data
(saved with the league, changed when policies are added or removed), and the choice is drawn
once per episode with a seeded generator, so a resumed run routes the same way.
"""

from __future__ import annotations

import fnmatch
import random
from collections.abc import Iterable

from devicerl.errors import ConfigError
from devicerl.league.config import MappingRule, PolicySpec


class PolicyMapping:
    """Routes episodes to policies by their task name."""

    def __init__(self, rules: Iterable[MappingRule], seed: int = 0) -> None:
        self.rules = list(rules)
        self.rng = random.Random(seed)

    @classmethod
    def from_policies(cls, policies: dict[str, PolicySpec], seed: int = 0) -> PolicyMapping:
        """The default mapping: every trainable policy plays the tasks of its own cluster."""
        rules = [MappingRule(name, spec.tasks) for name, spec in policies.items() if spec.trainable]
        return cls(rules, seed)

    def candidates(self, task: str) -> list[MappingRule]:
        """The rules whose glob matches ``task``."""
        return [r for r in self.rules if fnmatch.fnmatchcase(task, r.tasks)]

    def assign(self, task: str) -> str:
        """The policy that plays the next episode of ``task`` (weighted draw among matches)."""
        rules = self.candidates(task)
        if not rules:
            raise ConfigError(f"league.mapping: no rule maps task {task!r} to a policy")
        if len(rules) == 1:
            return rules[0].policy
        return self.rng.choices([r.policy for r in rules], [r.weight for r in rules])[0]

    def tasks_of(self, policy: str, tasks: Iterable[str]) -> list[str]:
        """The tasks among ``tasks`` that can be routed to ``policy``."""
        return [t for t in tasks if any(r.policy == policy for r in self.candidates(t))]

    def add_rule(self, rule: MappingRule) -> None:
        self.rules.append(rule)

    def remove_policy(self, policy: str) -> None:
        """Drop every rule of ``policy`` (its episodes go to the remaining matches)."""
        self.rules = [r for r in self.rules if r.policy != policy]
