"""The league's configuration: ``policies:`` and ``league:`` of a training config.

    policies:
      generalist: {algo: digirl, tasks: "*"}
      clicks: {algo: digirl, tasks: "click-*", actor: {lr: 3e-4}}
      old: {agent: {kind: small, path: runs/x/agent}, trainable: false}
    league:
      mapping: [{tasks: "click-*", policy: clicks, weight: 1}, {tasks: "*", policy: generalist}]
      snapshot: {threshold: 0.8, window: 100}
      pbt: {policy: generalist, population: 4, interval: 5}   # omitted: no PBT

Loaded with `devicerl.config.from_dict`, so unknown keys and out-of-bounds values fail in one
line naming the dotted key; `LeagueConfig.validate` checks the cross-references.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Literal

from devicerl.agents.factory import AgentSpec
from devicerl.algos.config import ActorConfig, CriticConfig, DigiRLConfig, FilteredBCConfig
from devicerl.errors import ConfigError

#: Policy names become file and TensorBoard names: keep them plain.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: Hyperparameters PBT can search (`devicerl.league.hparams` maps each onto a config field).
PBT_HPARAMS = ("actor_lr", "top_p", "epsilon")
#: Snapshots of one policy kept (the oldest beyond go); the regression gate's margin (a task is
#: flagged when the generalist is below the best snapshot by more).
MAX_SNAPSHOTS, GATE_MARGIN = 3, 0.1
#: PBT: bottom/top fraction, chance of resampling instead of perturbing, perturbation factors
#: (Ray Tune's `PopulationBasedTraining` defaults).
PBT_QUANTILE, PBT_RESAMPLE, PBT_PERTURBATION = 0.25, 0.25, (0.8, 1.2)
#: The hyperparameters PBT searches and their resample ranges.
PBT_RANGES: dict[str, tuple[float, float]] = {
    "actor_lr": (1e-5, 1e-3),
    "top_p": (0.05, 0.5),
    "epsilon": (0.0, 0.3),
}
#: Recent episodes per (policy, task) that frontier sampling weighs.
FRONTIER_WINDOW = 20
#: A league member's name may also hold '@' (snapshots are ``source@iteration``).
MEMBER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,95}$")


@dataclass
class PolicySpec:
    """One named policy: its agent, its algorithm and hyperparameters, trainable or frozen."""

    agent: AgentSpec = field(default_factory=AgentSpec)
    algo: Literal["digirl", "filtered_bc", "none"] = field(
        default="digirl", metadata={"help": "learning algorithm (none: acts only)"}
    )
    trainable: bool = field(default=True, metadata={"help": "false: frozen (acts, never learns)"})
    tasks: str = field(
        default="*",
        metadata={"help": "glob of the tasks it trains on (its cluster; '*': all tasks)"},
    )
    actor: ActorConfig = field(default_factory=ActorConfig)
    critic: CriticConfig = field(default_factory=CriticConfig)
    digirl: DigiRLConfig = field(default_factory=DigiRLConfig)
    filtered_bc: FilteredBCConfig = field(default_factory=FilteredBCConfig)
    learn_from: list[str] = field(
        default_factory=list,
        metadata={"help": "policies whose kept (filtered) episodes it also learns from"},
    )

    def covers(self, task: str) -> bool:
        """Whether ``task`` is in this policy's cluster."""
        return fnmatch.fnmatchcase(task, self.tasks)


@dataclass
class MappingRule:
    """Episodes of tasks matching ``tasks`` may go to ``policy`` (with ``weight`` among the
    rules that match)."""

    policy: str = field(default="", metadata={"help": "policy name"})
    tasks: str = field(default="*", metadata={"help": "task glob"})
    weight: float = field(default=1.0, metadata={"help": "relative weight", "gt": 0})


@dataclass
class SnapshotConfig:
    """Frozen snapshots of a policy whose windowed success crosses ``threshold``."""

    threshold: float = field(
        default=0.8, metadata={"help": "windowed success that triggers one", "min": 0, "max": 1}
    )
    window: int = field(default=100, metadata={"help": "recent episodes per policy", "min": 1})


@dataclass
class FrontierConfig:
    """Frontier task sampling: weight x(1-x) of a policy's recent success on a task, + floor."""

    floor: float = field(
        default=0.02, metadata={"help": "weight every task keeps (solved or hopeless)", "min": 0}
    )


@dataclass
class PBTConfig:
    """Population-based training of one policy (defaults: Ray Tune's PBT)."""

    policy: str = field(
        default="", metadata={"help": "policy copied into the population (empty: no PBT)"}
    )
    population: int = field(default=4, metadata={"help": "copies", "min": 2})
    interval: int = field(default=5, metadata={"help": "iterations between exploits", "min": 1})


@dataclass
class LeagueConfig:
    """How episodes, snapshots and the population are managed."""

    mapping: list[MappingRule] = field(
        default_factory=list,
        metadata={"help": "task glob -> policy rules (empty: each trainable policy's tasks)"},
    )
    snapshot: SnapshotConfig = field(default_factory=SnapshotConfig)
    frontier: FrontierConfig | None = field(
        default_factory=FrontierConfig,
        metadata={"help": "frontier task sampling (null: uniform over each policy's tasks)"},
    )
    pbt: PBTConfig = field(default_factory=PBTConfig)
    generalist: str = field(
        default="", metadata={"help": "the policy the regression gate watches (empty: none)"}
    )


@dataclass
class LeagueRunConfig:
    """The ``policies:`` and ``league:`` sections of a multi-policy training config."""

    policies: dict[str, PolicySpec] = field(default_factory=dict)
    league: LeagueConfig = field(default_factory=LeagueConfig)

    def validate(self) -> None:
        validate_league(self.policies, self.league)


def validate_league(policies: dict[str, PolicySpec], league: LeagueConfig) -> None:
    """Cross-references: names exist, are plain, and the mapping reaches only known policies."""
    if not policies:
        raise ConfigError("policies: at least one policy is needed")
    for name, spec in policies.items():
        if not NAME.match(name):
            raise ConfigError(f"policies.{name}: a name is letters, digits, '_', '.', '-'")
        if spec.trainable and spec.algo == "none":
            raise ConfigError(f"policies.{name}.algo: 'none' cannot train (set trainable: false)")
        for src in spec.learn_from:
            if src not in policies:
                raise ConfigError(f"policies.{name}.learn_from: unknown policy {src!r}")
    for i, rule in enumerate(league.mapping):
        if rule.policy not in policies:
            raise ConfigError(f"league.mapping[{i}].policy: unknown policy {rule.policy!r}")
    if league.generalist and league.generalist not in policies:
        raise ConfigError(f"league.generalist: unknown policy {league.generalist!r}")
    if league.pbt.policy:
        pbt = league.pbt
        if pbt.policy not in policies:
            raise ConfigError(f"league.pbt.policy: unknown policy {pbt.policy!r}")
        if not policies[pbt.policy].trainable:
            raise ConfigError(f"league.pbt.policy: {pbt.policy!r} is frozen")
