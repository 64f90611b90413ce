"""What a league run decides, on fixed inputs, for each shipped league config.

A whole league run is not reproducible (episode ids are random and feed DigiRL's held-out
split; the collector thread draws frontier tasks from the success table the trainer thread
writes; with ``overlap`` the version acting after an update depends on thread timing), so the
deterministic parts are recorded one by one, each from a league built as the trainer's league
observer builds it (`seed_everything(cfg.seed)`, `League.build`, `PBT.populate` when
``league.pbt`` is set):

- ``assign``: frontier sampling as the planner uses it (`FrontierAssignment` seeded as the
  trainer seeds it), for 60 episodes whose outcomes are recorded in the league as they are
  drawn; then each policy's frontier probabilities; and the mapping's own choice
  (`League.assign`, frontier off) for a fixed sequence of 40 tasks;
- ``learn``: one iteration of the league's `Population` on the fixed dataset (each episode
  planned for the policy the mapping gives it and routed to `League.destinations`): where each
  episode went, then each policy's metrics, selection and parameter deltas;
- ``decide``: 12 iterations of recorded outcomes (40 episodes each, success drawn per policy
  from fixed rates), each ended with `League.end_iteration` and, with PBT, `PBT.step`: the
  snapshots and exploits each iteration made, the members, history, PBT hyperparameters,
  weights hashes and the regression gate at the end.
"""

from __future__ import annotations

import random
import threading
from typing import Any

from devicerl.config import load_config
from devicerl.league.hparams import get_hparams
from devicerl.league.pbt import PBT
from devicerl.league.state import Frozen, League, weights_hash
from devicerl.records import EpisodePlan
from devicerl.runtime.loop.league import FrontierAssignment, member_config
from devicerl.runtime.loop.population import Population
from devicerl.runtime.setup.config import TrainConfig
from devicerl.runtime.setup.learners import seed_everything
from devicerl.tasks import TaskSampler, resolve

from .builders import ROOT, capture_selection, parameters
from .dataset import trajectories
from .summary import delta_summary, jsonable, one_thread, snapshot

#: name -> config file of every shipped league config.
LEAGUES: dict[str, str] = {
    "league-example": "configs/league-example.yaml",
    "league-dev16": "configs/miniwob-league-dev16.yaml",
    "league-pbt": "configs/miniwob-league-pbt.yaml",
}
#: League configs whose learners are updated once (the PBT population is four copies of the
#: dev16 generalist's setup: its update is the same code, four times the time).
LEARN = ("league-example", "league-dev16")


def load_league_config(name: str) -> TrainConfig:
    return load_config(TrainConfig, ROOT / "devicerl" / LEAGUES[name])


def build_league(cfg: TrainConfig) -> tuple[League, PBT | None]:
    """The league as the league run builds it (PBT population included)."""
    seed_everything(cfg.seed)
    league = League.build(cfg.policies, cfg.league, seed=cfg.seed)
    pbt = None
    if cfg.league.pbt.policy:
        pbt = PBT(league, cfg.league.pbt)
        pbt.populate()
    return league, pbt


def task_names(cfg: TrainConfig) -> list[str]:
    return [t.name for t in resolve(cfg.tasks.train)]


def record_assign(cfg: TrainConfig) -> dict[str, Any]:
    league, _ = build_league(cfg)
    lock = threading.RLock()
    tasks = resolve(cfg.tasks.train)
    names = [t.name for t in tasks]
    seed = cfg.seed * 1_000_003
    sampler = TaskSampler(tasks, seed=seed, max_steps=cfg.tasks.max_steps, seeds="train")
    assignment = FrontierAssignment(league, lock, tasks, seed)
    rng = random.Random(5)
    rate = {n: rng.choice([0.05, 0.3, 0.5, 0.7, 0.95]) for n in names}
    frontier = []
    for _ in range(60):
        chosen = assignment.next(sampler)
        assert chosen is not None
        inst, policy = chosen
        success = rng.random() < rate[inst.task.name]
        league.record(policy, inst.task.name, success)
        frontier.append([inst.task.name, inst.seed, policy, success])
    probabilities = {
        p: dict(zip(mine, assignment.frontier.probabilities(p, mine)))
        for p in sorted(assignment.shares())
        for mine in [league.mapping.tasks_of(p, names)]
    }
    league, _ = build_league(cfg)
    mapped = []
    for _ in range(40):
        task = rng.choice(names)
        mapped.append([task, league.assign(task)])
    return {"frontier": frontier, "probabilities": probabilities, "mapping": mapped}


def league_dataset(cfg: TrainConfig) -> list[Any]:
    """The fixed dataset over the league's tasks (48 episodes or more)."""
    names = tuple(task_names(cfg))
    return trajectories(names, per_task=max(3, -(-48 // len(names))))


def league_population(cfg: TrainConfig, league: League) -> Population:
    """The league's members in a `Population`, as `devicerl.runtime.loop.league.LeagueRun`
    adds them."""
    population = Population(cfg)
    for name, m in league.members.items():
        frozen = isinstance(m.policy, Frozen)
        config = member_config(cfg, name, m.spec)
        population.add_member(
            name, m.policy, config, m.spec.agent.make, trains=m.spec.trainable, frozen=frozen
        )
    return population


def record_learn(cfg: TrainConfig) -> dict[str, Any]:
    league, _ = build_league(cfg)
    population = league_population(cfg, league)
    data = league_dataset(cfg)
    routes = []
    for t in data:
        t.plan = EpisodePlan(policy=league.assign(t.task))
        routes.append([t.plan.policy, population.route(t, league.destinations(t.plan.policy))])
    learners = {m.name: m.learner for m in population.trainable()}
    kept = {name: capture_selection(learner, data) for name, learner in learners.items()}
    before = {
        name: snapshot(parameters(learner.actor, learner)) for name, learner in learners.items()
    }
    seed_everything(cfg.seed)
    metrics = population.update()
    policies = {}
    for name, learner in learners.items():
        after = parameters(learner.actor, learner)
        policies[name] = {
            "selection": kept[name],
            "deltas": delta_summary(before[name], after),
            "version": learner.actor.version,
        }
    population.close()
    return {"routes": routes, "metrics": metrics, "policies": policies}


def record_decide(cfg: TrainConfig) -> dict[str, Any]:
    league, pbt = build_league(cfg)
    names = task_names(cfg)
    rng = random.Random(9)
    routed = sorted({r.policy for r in league.mapping.rules})
    rate = {p: rng.choice([0.3, 0.6, 0.85, 0.95, 1.0]) for p in routed}
    iterations = []
    for _ in range(12):
        for _ in range(40):
            task = rng.choice(names)
            policy = league.assign(task)
            league.record(policy, task, rng.random() < rate[policy])
        snapshots = league.end_iteration()
        exploits = pbt.step() if pbt is not None else []
        iterations.append({"snapshots": snapshots, "exploits": exploits})
    members = {
        n: {
            "parent": m.parent,
            "snapshot": m.snapshot,
            "trainable": m.spec.trainable,
            "created_iteration": m.created_iteration,
            "teachers": m.teachers,
            "version": m.policy.version,
            "weights": weights_hash(m.policy),
            "success": league.success.policy_rate(n)[0],
        }
        for n, m in league.members.items()
    }
    out: dict[str, Any] = {
        "rates": rate,
        "iterations": iterations,
        "members": members,
        "history": league.history,
        "counters": league.counters,
        "mapping": [[r.policy, r.tasks, r.weight] for r in league.mapping.rules],
    }
    if cfg.league.generalist:
        out["regression"] = league.regression_report()
    if pbt is not None:
        out["pbt"] = {m: get_hparams(league[m].spec, pbt.names) for m in pbt.members}
    return out


def record_league(name: str) -> dict[str, Any]:
    """Everything recorded for one league config (JSON-ready)."""
    with one_thread():
        cfg = load_league_config(name)
        out: dict[str, Any] = {"league": name, "config": LEAGUES[name]}
        out["assign"] = record_assign(cfg)
        if name in LEARN:
            out["learn"] = record_learn(cfg)
        out["decide"] = record_decide(cfg)
    return jsonable(out)
