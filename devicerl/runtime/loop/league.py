"""A league run (a config with ``policies:``, docs/league.md) as an observer of the one
training loop (`devicerl.runtime.loop.trainer.Trainer`, seen through
`devicerl.runtime.loop.observers.TrainingRun`; `devicerl.runtime.loop.factory.make_trainer`
registers it).

The league (`devicerl.league.state.League`: members, mapping, success windows, snapshots) and
its PBT live here; the trainer's `Population` holds the members' learners and replays. The
observer changes the loop through the `Steering` it returns and the trainer's member methods:

- planning: each new episode's policy, by the mapping (`MappingAssignment`) or by frontier
  sampling, policy first and then its task (`FrontierAssignment`);
- routing: a finished episode goes to `League.destinations` (its own replay and its students');
  new episodes go only to members with a mapping rule;
- after each iteration: `League.end_iteration` (snapshots), the PBT step (an exploit target's
  learner is rebuilt with its new hyperparameters), the population follows the league's
  membership, per-policy metrics (``policy/NAME/rollout/success_rate``, ...);
- checkpoints hold the league state (``league/`` inside the checkpoint); the league is also
  saved to ``RUN/league/`` for ``devicerl league RUN``; the agents go to ``RUN/agents/NAME``.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import random
import re
import threading
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from devicerl.agents.base import Policy
from devicerl.errors import ConfigError
from devicerl.league.config import PolicySpec
from devicerl.league.frontier import FrontierSampler
from devicerl.league.hparams import apply_to_policy
from devicerl.league.pbt import PBT
from devicerl.league.persist import load_league, save_league
from devicerl.league.state import Frozen, League
from devicerl.league.table import league_table
from devicerl.records import Task, TaskInstance, Trajectory
from devicerl.runtime.loop.observers import Steering, TrainerObserver, TrainingRun
from devicerl.runtime.runs.checkpoint import atomic_write_text
from devicerl.runtime.setup.config import TrainConfig
from devicerl.tasks import TaskSampler, resolve

log = logging.getLogger(__name__)

#: Members whose names can be metric names (snapshots' '@' cannot).
_METRIC_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
LEAGUE_DIR = "league"


def member_config(cfg: TrainConfig, name: str, spec: PolicySpec) -> TrainConfig:
    """The run's config as one member's learner sees it: its agent, algorithm and
    hyperparameters, and a seed of its own."""
    seed = (cfg.seed * 1_000_003 + zlib.crc32(name.encode())) % 2**31
    spec = copy.deepcopy(spec)  # a later PBT exploit changes the spec, not this learner
    return dataclasses.replace(
        cfg,
        agent=spec.agent,
        algo=spec.algo,
        actor=spec.actor,
        critic=spec.critic,
        digirl=spec.digirl,
        filtered_bc=spec.filtered_bc,
        seed=seed,
        policies={},
    )


class MappingAssignment:
    """Task first (the sampler's draw), then the mapping's policy for it."""

    def __init__(self, league: League, lock: threading.RLock) -> None:
        self.league, self.lock = league, lock

    def next(self, sampler: TaskSampler) -> tuple[TaskInstance, str] | None:
        inst = sampler.next()
        if inst is None:
            return None
        with self.lock:
            return inst, self.league.assign(inst.task.name)


class FrontierAssignment:
    """Policy first (by the mapping's weights), then that policy's `FrontierSampler` draws the
    task among the tasks the mapping routes to it (weight x(1-x) of its recent success)."""

    def __init__(self, league: League, lock: threading.RLock, tasks: list[Task], seed: int) -> None:
        self.league, self.lock = league, lock
        self.by_name = {t.name: t for t in tasks}
        self.frontier = FrontierSampler(league.success, league.config.frontier.floor, seed=seed + 1)
        self.rng = random.Random(seed)

    def shares(self) -> dict[str, float]:
        """Each policy's share of new episodes: the weights of its rules that reach a task."""
        out: dict[str, float] = {}
        for rule in self.league.mapping.rules:
            if rule.policy in self.league and any(
                rule in self.league.mapping.candidates(t) for t in self.by_name
            ):
                out[rule.policy] = out.get(rule.policy, 0.0) + rule.weight
        return out

    def next(self, sampler: TaskSampler) -> tuple[TaskInstance, str] | None:
        with self.lock:
            shares = self.shares()
            if not shares:
                raise ConfigError("league.mapping: no policy plays any of the run's tasks")
            names = sorted(shares)
            policy = self.rng.choices(names, [shares[n] for n in names])[0]
            tasks = self.league.mapping.tasks_of(policy, list(self.by_name))
            task = self.frontier.sample(policy, tasks)
        lo, hi = sampler.seed_range
        return TaskInstance(self.by_name[task], lo + self.rng.randrange(hi - lo)), policy


class LeagueRun(TrainerObserver):
    """The league's part of a training run (see the module doc)."""

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.lock = threading.RLock()  # the collector thread reads the league under it
        self.league = League.build(cfg.policies, cfg.league, seed=cfg.seed)
        self.pbt = PBT(self.league, cfg.league.pbt, cfg.seed) if cfg.league.pbt.policy else None
        if self.pbt is not None:
            self.pbt.populate()
        self._run: TrainingRun | None = None
        self._fresh: dict[str, list[bool]] = {}  # this iteration's outcomes per policy

    @property
    def trainer(self) -> TrainingRun:
        """The run this league is part of (set when the trainer registers it)."""
        if self._run is None:
            raise RuntimeError("the league is not attached to a trainer yet")
        return self._run

    def attach(self, run: TrainingRun) -> Steering:
        self._run = run
        self.sync_members()
        return self.steering()

    def steering(self) -> Steering:
        """The whole of the league's planning, routing and evaluation, as it is now."""
        t, cfg = self.trainer, self.cfg
        assignment: MappingAssignment | FrontierAssignment
        if cfg.league.frontier is not None:
            seed = cfg.seed * 1_000_003 + t.iteration
            tasks = resolve(cfg.tasks.train)
            assignment = FrontierAssignment(self.league, self.lock, tasks, seed)
        else:
            assignment = MappingAssignment(self.league, self.lock)
        return Steering(assignment, self.routed(), self.destinations, self.eval_member())

    def destinations(self, policy: str) -> list[str]:
        with self.lock:
            return self.league.destinations(policy)

    def eval_member(self) -> str:
        """The policy evaluated at the end: the generalist, else the first trainable one."""
        name = self.cfg.league.generalist
        return name or next(iter(self.league.trainable() or self.league.members))

    # -- membership ---------------------------------------------------------------------------
    def sync_members(self) -> None:
        """The population follows the league: a member for every league member (a learner
        for the trainable ones), none for those that left."""
        run = self.trainer
        pop = run.population
        for name, m in self.league.members.items():
            if name in pop and pop[name].policy is m.policy:
                continue
            frozen = isinstance(m.policy, Frozen)
            spec = m.spec
            run.add_member(
                name,
                m.policy,
                member_config(self.cfg, name, spec),
                spec.agent.make,
                trains=spec.trainable,
                frozen=frozen,
                configure=None if frozen else (lambda p, s=spec: apply_to_policy(p, s)),
            )
        for name in [n for n in pop.members if n not in self.league]:
            run.remove_member(name)

    def routed(self) -> frozenset[str]:
        """The members new episodes can go to: those with a mapping rule (the others, teachers
        only or snapshots, need no acting copy)."""
        with self.lock:
            return frozenset(r.policy for r in self.league.mapping.rules)

    def add_policy(
        self,
        name: str,
        spec: PolicySpec,
        *,
        tasks: str | None = None,
        weight: float = 1.0,
        policy: Policy | None = None,
    ) -> None:
        """Add a policy now: it gets a mapping rule (``tasks``, default its spec's cluster; a
        frozen one only if ``tasks`` is given), a learner and replay if it trains, and the
        collector's copy at the next batch."""
        unknown = [t for t in spec.learn_from if t not in self.league]
        if unknown:
            raise ConfigError(f"policies.{name}.learn_from: unknown policy {unknown[0]!r}")
        with self.lock:
            self.league.add_member(
                name, spec, policy or spec.agent.make(), teachers=spec.learn_from
            )
        self.sync_members()
        if spec.trainable or tasks is not None:
            self.add_rule(name, tasks or spec.tasks, weight)

    def add_rule(self, policy: str, tasks: str = "*", weight: float = 1.0) -> None:
        """Route new episodes of ``tasks`` to ``policy`` too. The collector gets its copy
        before any episode can be assigned to it."""
        routed = self.trainer.steering.routed or frozenset()
        self.trainer.steer(Steering(routed=routed | {policy}))
        self.trainer.publish()
        with self.lock:
            self.league.add_rule(policy, tasks, weight)

    def remove_policy(self, name: str) -> None:
        """Remove a policy now: no new episode goes to it, its learner closes; episodes it is
        playing finish (stored, trained on by no one)."""
        with self.lock:
            self.league.remove(name)
        self.sync_members()
        self.trainer.steer(Steering(routed=self.routed()))
        self.trainer.publish()

    # -- the loop's hooks ---------------------------------------------------------------------
    def on_episode(self, trainer: TrainingRun, t: Trajectory) -> None:
        if t.plan is not None and t.plan.policy in self.league:
            with self.lock:
                self.league.record(t.plan.policy, t.task, t.success)
            self._fresh.setdefault(t.plan.policy, []).append(t.success)

    def after_iteration(self, trainer: TrainingRun, metrics: Mapping[str, Any]) -> Steering:
        with self.lock:
            snapshots = self.league.end_iteration()
            exploits = self.pbt.step() if self.pbt is not None else []
        for event in exploits:
            self._reset_after_exploit(event["target"], event["donor"])
        self.sync_members()
        if snapshots or exploits:
            log.info("league: snapshots %s, exploits %d", snapshots, len(exploits))
        return Steering(routed=self.routed())

    def _reset_after_exploit(self, target: str, donor: str) -> None:
        """A PBT exploit: ``target`` took ``donor``'s actor weights and new hyperparameters. Its
        learner is rebuilt with them (fresh optimiser state: the 'reset' choice of
        docs/league.md), its critics copied from the donor's."""
        pop = self.trainer.population
        donor_member = pop[donor]
        assert donor_member.handle is not None and donor_member.learner is not None
        donor_member.handle.refresh()  # a shard's critics, into the trainer's copy
        m = self.league[target]
        rebuilt = self.trainer.add_member(
            target,
            m.policy,
            member_config(self.cfg, target, m.spec),
            m.spec.agent.make,
            configure=lambda p, s=m.spec: apply_to_policy(p, s),
        )
        assert rebuilt.learner is not None
        for key, module in rebuilt.learner.modules().items():
            module.load_state_dict(donor_member.learner.modules()[key].state_dict())

    def iteration_metrics(self, trainer: TrainingRun) -> dict[str, float]:
        fresh_by, self._fresh = self._fresh, {}
        out: dict[str, float] = {
            "league/members": len(self.league.members),
            "league/snapshots": self.league.counters["snapshots"],
            "league/exploits": sum(1 for h in self.league.history if h["event"] == "exploit"),
        }
        for name, member in self.league.members.items():
            if not _METRIC_NAME.match(name):
                continue
            rate, _ = self.league.success.policy_rate(name)
            prefix = f"policy/{name}/"
            out[prefix + "rollout/episodes"] = self.league.success.episodes.get(name, 0)
            out[prefix + "policy_version"] = member.policy.version
            if rate is not None:
                out[prefix + "rollout/success_rate"] = rate
            mine = fresh_by.get(name)
            if mine:
                out[prefix + "rollout/iteration_success_rate"] = sum(mine) / len(mine)
        return out

    def summary(self, trainer: TrainingRun) -> dict[str, Any]:
        return {
            "league": {
                "members": {
                    n: {
                        "trainable": m.spec.trainable,
                        "snapshot": m.snapshot,
                        "version": m.policy.version,
                        "success": self.league.success.policy_rate(n)[0],
                        "episodes": self.league.success.episodes.get(n, 0),
                    }
                    for n, m in self.league.members.items()
                },
                "counters": dict(self.league.counters),
                "evaluated": trainer.steering.evaluated,
                "table": league_table(self.league),
            }
        }

    def on_end(self, trainer: TrainingRun) -> None:
        for name in self.league.trainable():
            self.league[name].policy.save(trainer.run_dir.path / "agents" / name)
        self.save(trainer.run_dir.path / LEAGUE_DIR)

    def save(self, folder: Path) -> None:
        """The league (for ``devicerl league RUN``) and its table as text (for the viewer,
        which loads no weights)."""
        save_league(self.league, folder, self.pbt)
        atomic_write_text(folder / "table.txt", league_table(self.league) + "\n")

    def on_checkpoint(self, trainer: TrainingRun, folder: Path) -> None:
        save_league(self.league, folder / LEAGUE_DIR, self.pbt)
        self.save(trainer.run_dir.path / LEAGUE_DIR)

    def on_restore(self, trainer: TrainingRun, folder: Path) -> Steering:
        league, pbt = load_league(folder / LEAGUE_DIR)
        for name in list(trainer.population.members):
            trainer.remove_member(name)
        self.league, self.pbt = league, pbt
        self.sync_members()
        return self.steering()
