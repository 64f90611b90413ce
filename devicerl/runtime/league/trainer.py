"""`LeagueTrainer`: a training run with ``policies:`` (docs/league.md).

The loop is the single-policy trainer's (`devicerl.runtime.trainer`): the collector keeps the
devices busy, an iteration takes K finished episodes, learns, publishes. What changes:

- acting: each new episode gets a policy (the mapping, or frontier sampling: policy first, then
  its task), inference is batched per policy, every trajectory names its policy;
- learning: each trainable policy has its own replay and learner (`LeagueLearners`); a finished
  episode goes to `League.destinations` (its own replay and its students');
- after each iteration: `League.end_iteration` (snapshots), the PBT step (an exploit target's
  learner is rebuilt with its new hyperparameters), the collector's copies are refreshed;
- checkpoints hold every learner and the league state (`league/` inside the checkpoint, written
  with `devicerl.league.persist`, so a kill -9 leaves both of one iteration); the league is also
  saved to ``RUN/league/`` for ``devicerl league RUN``;
- metrics are also logged per policy (``policy/NAME/rollout/success_rate``, ``policy/NAME/train/
  ...``); the agents are saved to ``RUN/agents/NAME`` and the evaluated one to ``RUN/agent``.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from devicerl.agents.base import Policy
from devicerl.errors import ConfigError
from devicerl.league.acting import POLICY_KEY
from devicerl.league.config import PolicySpec
from devicerl.league.pbt import PBT
from devicerl.league.persist import load_league, save_league
from devicerl.league.state import League
from devicerl.league.table import league_table
from devicerl.records import Trajectory
from devicerl.runtime.acting import CollectionSource
from devicerl.runtime.checkpoint import atomic_write_text
from devicerl.runtime.distributed.group import GroupInfo
from devicerl.runtime.league.acting import LeagueActors, LeagueTaskSampler, published
from devicerl.runtime.league.learning import LeagueLearners
from devicerl.runtime.progress import RateProgress
from devicerl.runtime.run_dir import RunDir
from devicerl.runtime.train_config import TrainConfig
from devicerl.runtime.trainer import Trainer, TrainState
from devicerl.tasks import TaskSampler, resolve

log = logging.getLogger(__name__)

#: Members whose names can be metric names (snapshots' '@' cannot).
_METRIC_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
LEAGUE_DIR = "league"


def make_trainer(cfg: TrainConfig, run_dir: RunDir, **kwargs: Any) -> Trainer:
    """The trainer a config asks for: a league run when it has ``policies:`` (and trains)."""
    if cfg.policies and cfg.mode != "eval":
        return LeagueTrainer(cfg, run_dir, **kwargs)
    return Trainer(cfg, run_dir, **kwargs)


class LeagueTrainer(Trainer):
    """Runs a league config in one run folder (see the module doc)."""

    league: League
    pbt: PBT | None
    league_learners: LeagueLearners

    def _build_learning(self, group: GroupInfo | None) -> None:
        cfg = self.cfg
        if group is not None and group.world_size > 1:
            raise ConfigError("policies: a league run does not run under accelerate launch")
        self.lock = threading.RLock()  # the collector thread reads the league under it
        self.actors: LeagueActors | None = None
        #: called after every iteration (tests and scripts add / remove policies here)
        self.on_iteration: Callable[[LeagueTrainer], None] | None = None
        self.league = League.build(cfg.policies, cfg.league, seed=cfg.seed)
        self.pbt = None
        if cfg.league.pbt.policy:
            self.pbt = PBT(self.league, cfg.league.pbt)
            self.pbt.populate()
        self.league_learners = LeagueLearners(cfg, self.league)
        self.league_learners.sync_members()
        self.learner = None
        self.actor = self._eval_member()

    def _eval_member(self) -> Policy:
        """The policy evaluated at the end: ``eval.policy``, else the generalist, else the
        first trainable policy."""
        name = self.cfg.eval.policy or self.cfg.league.generalist
        name = name or next(iter(self.league.trainable() or self.league.members))
        if name not in self.league:
            raise ConfigError(f"eval.policy: no policy {name!r} in the league")
        self.eval_name = name
        return self.league[name].policy

    # -- membership during a run --------------------------------------------------------------
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
            self.league.add(name, spec, policy or spec.agent.make(), teachers=spec.learn_from)
        self.league_learners.sync_members()
        if spec.trainable or tasks is not None:
            self.add_rule(name, tasks or spec.tasks, weight)

    def add_rule(self, policy: str, tasks: str = "*", weight: float = 1.0) -> None:
        """Route new episodes of ``tasks`` to ``policy`` too (a snapshot, to gate with fresh
        episodes). The collector gets its copy before any episode can be assigned to it."""
        self._publish(include={policy})
        with self.lock:
            self.league.add_rule(policy, tasks, weight)

    def remove_policy(self, name: str) -> None:
        """Remove a policy now: no new episode goes to it, its learner closes; episodes it is
        playing finish (stored, trained on by no one)."""
        with self.lock:
            self.league.remove(name)
        self.league_learners.sync_members()
        self._publish()

    # -- acting -------------------------------------------------------------------------------
    def _publish(self, include: set[str] | frozenset[str] = frozenset()) -> None:
        """The collector's roster: the members new episodes can go to (they have a mapping
        rule) and ``include``; the others (teachers only, snapshots) need no acting copy."""
        if self.actors is None:
            return
        routed = {r.policy for r in self.league.mapping.rules} | set(include)
        members = [(n, m) for n, m in self.league.members.items() if n in routed]
        self.actors.publish({n: published(m.spec, m.policy) for n, m in members})

    def _collection_source(self) -> CollectionSource:
        cfg = self.cfg
        sampler: TaskSampler
        if cfg.league.frontier.enabled:
            seed = cfg.seed * 1_000_003 + self.state.iteration
            sampler = LeagueTaskSampler(
                self.league, self.lock, resolve(cfg.tasks.train), seed, cfg.tasks.max_steps
            )
            self.actors = LeagueActors(self.league, self.lock, sampler)
        else:
            sampler = self._train_sampler()
            self.actors = LeagueActors(self.league, self.lock)
        self._publish()
        return self._collector(lambda: self.make_pool(sampler), None, league=self.actors)

    # -- one iteration ------------------------------------------------------------------------
    def _iteration(self, bg: CollectionSource, bar: RateProgress):
        cfg, s = self.cfg, self.state
        fresh, wait_s, cut = self._gather(bg, bar)
        if cut:
            return
        t1 = time.perf_counter()
        metrics: dict[str, Any] = self.league_learners.update()
        learn_s = time.perf_counter() - t1
        s.version += 1
        s.iteration += 1
        with self.lock:
            snapshots = self.league.end_iteration()
            exploits = self.pbt.step() if self.pbt is not None else []
        for event in exploits:
            self.league_learners.reset_after_exploit(event["target"], event["donor"])
        self.league_learners.sync_members()
        self._publish()
        bg.publish(None, s.version)
        if snapshots or exploits:
            log.info("league: snapshots %s, exploits %d", snapshots, len(exploits))
        metrics.update(self._rollout_metrics(fresh, bg, wait_s, learn_s))
        metrics.update(self._league_metrics(fresh))
        self.metrics.log(metrics, s.env_steps)
        if self.on_iteration is not None:
            self.on_iteration(self)
        if s.iteration % cfg.checkpoint_every == 0:
            self.checkpoint()

    def _ingest(self, t: Trajectory, train: bool = True) -> bool:
        """Count, store and route one trajectory; True when it is a fresh labelled episode."""
        if not self._store(t):
            return False
        policy = t.extras.get(POLICY_KEY)
        if policy in self.league:
            self.lags.append(self.league[policy].policy.version - t.policy_version)
            with self.lock:
                self.league.record(policy, t.task, t.success)
        if not train:
            return False
        self.league_learners.route(t)
        return True

    def _league_metrics(self, fresh: list[Trajectory]) -> dict[str, float]:
        out: dict[str, float] = {
            "league/members": len(self.league.members),
            "league/snapshots": self.league.counters["snapshots"],
            "league/exploits": sum(1 for h in self.league.history if h["event"] == "exploit"),
        }
        for name, member in self.league.members.items():
            if not _METRIC_NAME.match(name):
                continue
            rate, _ = self.league.success.policy_rate(name)
            mine = [t for t in fresh if t.extras.get(POLICY_KEY) == name]
            prefix = f"policy/{name}/"
            out[prefix + "rollout/episodes"] = self.league.success.episodes.get(name, 0)
            out[prefix + "policy_version"] = member.policy.version
            if rate is not None:
                out[prefix + "rollout/success_rate"] = rate
            if mine:
                out[prefix + "rollout/iteration_success_rate"] = sum(t.success for t in mine) / len(
                    mine
                )
        return out

    def summary(self, elapsed_s: float) -> dict[str, Any]:
        out = super().summary(elapsed_s)
        out["league"] = {
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
            "evaluated": self.eval_name,
            "table": league_table(self.league),
        }
        return out

    # -- end of the run -----------------------------------------------------------------------
    def _close_learners(self) -> None:
        self.league_learners.close()

    def _save_agent(self) -> None:
        for name in self.league.trainable():
            self.league[name].policy.save(self.run_dir.path / "agents" / name)
        self.actor.save(self.run_dir.path / "agent")
        self._save_league()

    # -- checkpoints --------------------------------------------------------------------------
    def checkpoint(self):  # type: ignore[no-untyped-def]
        self.league_learners.refresh()
        self.writer.flush()
        models: dict[str, Any] = {}
        optims: dict[str, Any] = {}
        learners: dict[str, Any] = {}
        for i, (name, pl) in enumerate(self.league_learners.by_name.items()):
            key = f"policy{i}"
            models[f"{key}.actor"] = pl.learner.actor.get_weights()
            models.update({f"{key}.{k}": m.state_dict() for k, m in pl.learner.modules().items()})
            optims.update(
                {f"{key}.{k}": o.state_dict() for k, o in pl.learner.optimizers().items()}
            )
            learners[name] = {
                "key": key,
                "replay": pl.replay.state_dict(),
                "learner": pl.learner.state_dict(),
            }
        state = {
            "train": asdict(self.state),
            "league_learners": learners,
            "recent": list(self.recent),
            "lags": self.lags[-10_000:],
            "exploration": self.exploration.state_dict() if self.exploration else {},
        }

        def write_league(folder):  # type: ignore[no-untyped-def]
            save_league(self.league, folder / LEAGUE_DIR, self.pbt)

        path = self.ckpt.save(self.state.iteration, models, optims, state, extra=write_league)
        self._save_league()
        return path

    def _save_league(self) -> None:
        """The league in ``RUN/league/`` (for ``devicerl league RUN``) and its table as text
        (for the viewer, which loads no weights)."""
        folder = self.run_dir.path / LEAGUE_DIR
        save_league(self.league, folder, self.pbt)
        atomic_write_text(folder / "table.txt", league_table(self.league) + "\n")

    def _restore(self) -> None:
        ck = self.ckpt.load_latest(set_aside=self.run_dir.locked)
        if ck is None:
            log.warning("no checkpoint in %s: starting from scratch", self.ckpt.root)
            return
        league, pbt = load_league(ck.path / LEAGUE_DIR)
        self.league_learners.close()
        self.league, self.pbt = league, pbt
        self.league_learners = LeagueLearners(self.cfg, league)
        store = self.run_dir.store(skip_bad=True)
        for name, saved in ck.state["league_learners"].items():
            if name not in league or not league[name].spec.trainable:
                continue
            pl = self.league_learners.add(name)
            key = saved["key"]
            pl.learner.actor.set_weights(ck.models[f"{key}.actor"], league[name].policy.version)
            for k, module in pl.learner.modules().items():
                module.load_state_dict(ck.models[f"{key}.{k}"])
            for k, opt in pl.learner.optimizers().items():
                if f"{key}.{k}" in ck.optimizers:
                    opt.load_state_dict(ck.optimizers[f"{key}.{k}"])
            pl.learner.load_state_dict(saved["learner"])
            pl.replay.load_state_dict(saved["replay"], store, strict=False)
        self.league_learners.sync_members()
        self.state = TrainState(**ck.state["train"])
        self.recent.extend(ck.state.get("recent", []))
        self.lags = list(ck.state.get("lags", []))
        if self.exploration is not None:
            self.exploration.load_state_dict(ck.state.get("exploration", {}))
        self.actor = self._eval_member()
        ck.restore_rng()
        log.info("resumed league run from %s (iteration %d)", ck.path, ck.iteration)
