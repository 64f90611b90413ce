"""The training loop: offline, online, off-to-online and eval-only, resumable after kill -9.

One loop serves every run; `devicerl.runtime.loop.factory.make_trainer` builds it with the
observers its config names. The run's `Population` holds the policies it acts with and trains:
one for a single-policy run, a league's members when the config has ``policies:`` (a league is
an observer of this loop, `devicerl.runtime.loop.league.LeagueRun`: it adds the members, steers
which policy new episodes get and where finished ones go, snapshots and runs PBT after each
iteration).

Online, an iteration takes K fresh, judged trajectories from the collection source (a collector
thread in this process, or rollout groups on a Ray cluster, which keep the devices stepping
meanwhile; either way each episode passes the judging stage once on its way here), routes them
into the members' bounded replay buffers, runs every trainable member's updates and publishes
the new policies; the collector picks them up between batches. Every trajectory carries the
version of the policy that acted (the lag is logged; the group-relative learners leave out
task groups acted too many versions ago, ``grpo.max_staleness``).

Everything ingested is appended to the run's trajectory store as it arrives; checkpoints hold
weights (safetensors), optimizers, trainer state, RNG states and the replay buffers as pointers
into that store, so ``devicerl train --resume RUN_DIR`` continues where the last checkpoint was.
SIGINT / SIGTERM stop a run gracefully (`devicerl.runtime.runs.stop`): the update in progress ends,
a checkpoint and the agent are written, the devices are closed and `Trainer.stopped` is set.

Observers (`devicerl.runtime.loop.observers.TrainerObserver`, registered with
`Trainer.register_observer`) see every stored episode and every iteration, add to checkpoints,
restores, metrics and the summary, and change the run only through the `Steering` records
their hooks return or the trainer's public methods (tests and scripts register their own, e.g.
to add a league member during a run).
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from devicerl.agents.base import Policy
from devicerl.errors import ConfigError
from devicerl.judges import is_labelled
from devicerl.pool.pool import EnvPool
from devicerl.records import DEFAULT_POLICY, Trajectory
from devicerl.runtime.acting.copies import ActingCopies
from devicerl.runtime.acting.episode_counts import EpisodeCounts
from devicerl.runtime.acting.exploration import ExplorationSchedule
from devicerl.runtime.acting.planning import EpisodePlanner
from devicerl.runtime.acting.sources import BackgroundCollector, CollectionSource
from devicerl.runtime.distributed.process_group import ProcessGroupInfo
from devicerl.runtime.loop.evaluation import EvalResult, eval_sampler, evaluate_policy
from devicerl.runtime.loop.observers import SINGLE_POLICY, Steering, TrainerObserver
from devicerl.runtime.loop.population import Member, Population
from devicerl.runtime.loop.task_groups import TaskGroupBuffer
from devicerl.runtime.runs.folder import RunDir
from devicerl.runtime.runs.progress import RateProgress
from devicerl.runtime.runs.stop import GracefulStop, StopRequested
from devicerl.runtime.setup.acting import make_planner, make_policy
from devicerl.runtime.setup.config import TrainConfig
from devicerl.runtime.setup.learners import seed_everything, set_torch_threads
from devicerl.runtime.setup.offline import load_offline
from devicerl.secrets import scrub
from devicerl.tasks import resolve

log = logging.getLogger(__name__)

#: Newest checkpoints kept on disk.
KEEP_CHECKPOINTS = 3
#: Seed of the evaluation instances (the same for every run, so results compare).
EVAL_SEED = 10_000


@dataclass
class TrainState(EpisodeCounts):
    """Counters that a checkpoint saves and a resume restores. Its episode counts are the run's
    stored episodes (the collector's count what acting produced in this process, from zero at
    each start; both use the one `EpisodeCounts` rule)."""

    iteration: int = 0
    env_steps: int = 0
    version: int = 0
    offline_done: int = 0


def acting_policy(t: Trajectory) -> str:
    """The member that acted in ``t`` (its plan's; `DEFAULT_POLICY` when it has none)."""
    return t.plan.policy if t.plan is not None else DEFAULT_POLICY


def unlabelled_reason(t: Trajectory) -> str:
    """Why the judge left ``t`` unlabelled, in short (the reason's first clause)."""
    verdict = t.judgement.verdict if t.judgement is not None else {}
    return str(verdict.get("reason") or "no reason given").split(":")[0][:80]


class Trainer:
    """Runs one `TrainConfig` in one run folder (see the module doc). Build it with
    `devicerl.runtime.loop.factory.make_trainer`, which registers the observers the config
    names (a league's members come from its observer) and restores a resumed run."""

    def __init__(
        self, cfg: TrainConfig, run_dir: RunDir, *, launch: ProcessGroupInfo | None = None
    ):
        """``launch``: this process's place in an ``accelerate launch`` (rank 0 only)."""
        self.cfg = cfg
        set_torch_threads()
        seed_everything(cfg.seed)
        self.run_dir = run_dir  # created (and locked) by `run`: building writes nothing
        self.state = TrainState()
        self.population = Population(cfg, launch)
        self.observers: list[TrainerObserver] = []
        self.steering = SINGLE_POLICY
        if not cfg.policies:
            self.add_member(DEFAULT_POLICY, make_policy(cfg.agent), cfg, cfg.agent.make)
        self.ckpt = run_dir.checkpoint_manager(keep=KEEP_CHECKPOINTS)
        self.recent: deque[int] = deque(maxlen=100)
        self.lags: list[int] = []
        #: why this session's unlabelled episodes went unlabelled (the judge's reasons)
        self.unlabelled_reasons: Counter[str] = Counter()
        #: episodes the collector finished ahead of the loop when the phase ended (budget spent
        #: or a stop): stored, never trained on, not counted in the budget, so a resumed run
        #: continues from the steps the loop took
        self.unused_episodes = 0
        self.exploration = ExplorationSchedule.from_config(cfg.exploration)
        self.eval_result: EvalResult | None = None
        self.stop = GracefulStop()
        self.source: CollectionSource | None = None
        self.task_groups = TaskGroupBuffer() if cfg.group_size is not None else None

    @property
    def iteration(self) -> int:
        return self.state.iteration

    @property
    def actor(self) -> Policy:
        """The policy evaluated at the end (a league's generalist, else its first member)."""
        assert self.steering.evaluated is not None
        return self.population[self.steering.evaluated].policy

    @property
    def learns(self) -> bool:
        return bool(self.population.trainable())

    # -- what observers may call --------------------------------------------------------------
    def register_observer(self, observer: TrainerObserver) -> None:
        """Add ``observer`` to the loop and apply the steering it asks for at once."""
        self.observers.append(observer)
        self.steer(observer.attach(self))

    def steer(self, steering: Steering | None) -> None:
        """Apply the fields ``steering`` sets (None leaves a field as it is); the collection
        source sees new routing at the next `publish`."""
        if steering is None:
            return
        asked = {f.name: getattr(steering, f.name) for f in fields(steering)}
        self.steering = replace(self.steering, **{k: v for k, v in asked.items() if v is not None})

    def add_member(
        self,
        name: str,
        policy: Policy,
        cfg: TrainConfig,
        make: Callable[[], Policy],
        **options: Any,
    ) -> Member:
        """Add (or rebuild, keeping its replay) a member of the run's `Population`."""
        return self.population.add_member(name, policy, cfg, make, **options)

    def remove_member(self, name: str) -> None:
        """Remove a member: no new episode goes to it, its learner closes."""
        self.population.remove_member(name)

    def publish(self) -> None:
        """The members new episodes can go to, to the collection source."""
        if self.source is not None:
            roster = self.population.roster(self.steering.routed)
            self.source.publish(roster, self.state.version)

    # -- devices ------------------------------------------------------------------------------
    def make_pool(self, sampler: Any) -> EnvPool:
        return self.cfg.env.make_pool(sampler, seed=self.cfg.seed)

    def planner(self) -> EpisodePlanner:
        """The planner of this start's training episodes (a resume draws new instances)."""
        seed = self.cfg.seed * 1_000_003 + self.state.iteration
        return make_planner(
            self.cfg, seed, exploration=self.exploration, assignment=self.steering.assignment
        )

    # -- the run ------------------------------------------------------------------------------
    @property
    def stopped(self) -> str | None:
        """The signal's name when a SIGINT / SIGTERM stopped the run early, else None."""
        return self.stop.name or None

    def run(self) -> dict[str, Any]:
        """Train / evaluate as configured, holding the run folder's lock throughout (taken
        here unless the caller holds it already; released at the end either way)."""
        if not self.run_dir.locked:
            self.run_dir.create().lock()
        try:
            with self.stop:
                return self._run()
        finally:
            self.run_dir.unlock()

    def _run(self) -> dict[str, Any]:
        cfg = self.cfg
        t0 = time.perf_counter()
        self.run_dir.create()
        with (
            # a shard per finished episode, or per the episodes waiting for the writer (a crash
            # loses only episodes in flight or waiting); a checkpoint flushes first, so the
            # replay pointers it saves always resolve
            self.run_dir.writer(background=True) as self.writer,
            self.run_dir.metrics_logger(cfg.logging, run_config=cfg) as self.metrics,
        ):
            try:
                if cfg.mode in ("offline", "off2on"):
                    self._offline_phase()
                if cfg.mode in ("online", "off2on") and not self.stop.requested:
                    self._online_phase()
            finally:
                self.population.close()
            self._save_agents()  # before evaluating: a failed eval loses no agent
            evaluates = cfg.mode == "eval" or (cfg.eval.at_end and cfg.eval.n_tasks > 0)
            if evaluates and not self.stop.requested:
                try:
                    self.eval_result = self.evaluate()
                except StopRequested:
                    log.warning("evaluation stopped by %s: no eval.json", self.stop.name)
                else:
                    self.metrics.log(self.eval_result.metrics(), self.state.env_steps)
        summary = self.summary(time.perf_counter() - t0)
        (self.run_dir.path / "summary.json").write_text(scrub(json.dumps(summary, indent=2)))
        return summary

    def _save_agents(self) -> None:
        for observer in self.observers:
            observer.on_end(self)
        if self.learns:
            self.actor.save(self.run_dir.path / "agent")

    def summary(self, elapsed_s: float) -> dict[str, Any]:
        s = self.state
        out: dict[str, Any] = {
            "mode": self.cfg.mode,
            "algo": self.cfg.algo,
            **asdict(s),
            "rollout_success_rate": s.successes / s.episodes if s.episodes else None,
            "mean_policy_lag": float(np.mean(self.lags)) if self.lags else None,
            "elapsed_s": elapsed_s,
        }
        if self.unlabelled_reasons:
            out["unlabelled_reasons"] = dict(self.unlabelled_reasons)
        if self.unused_episodes:
            out["stored_unused_episodes"] = self.unused_episodes
        if self.stopped:
            out["stopped_by"] = self.stopped
        if self.eval_result is not None:
            out["eval"] = self.eval_result.as_dict()
        for observer in self.observers:
            out.update(observer.summary(self))
        return out

    # -- offline ------------------------------------------------------------------------------
    def _offline_phase(self) -> None:
        cfg = self.cfg
        if self.state.offline_done >= cfg.offline_iterations:
            return
        if not self.population.replay_size():
            assert cfg.offline_data is not None
            data = load_offline(cfg.offline_data)
            for t in data:
                self.writer.append(t)  # so the replay's pointers resolve after a resume
            self.population.add_offline(data)  # given data: no policy-lag limit
            self.writer.flush()
        with RateProgress("offline", total=cfg.offline_iterations, unit="iterations") as bar:
            bar.update(self.state.offline_done)
            while self.state.offline_done < cfg.offline_iterations and not self.stop.requested:
                metrics = self.population.update()
                self.state.offline_done += 1
                self.state.iteration += 1
                self.state.version += 1
                self.metrics.log(metrics, self.state.env_steps)
                bar.update(1, loss=metrics.get("train/actor_loss", float("nan")))
                if self.state.iteration % cfg.checkpoint_every == 0:
                    self.checkpoint()
        self.checkpoint()

    # -- online -------------------------------------------------------------------------------
    def _budget_left(self) -> bool:
        cfg, s = self.cfg, self.state
        if self.stop.requested:
            return False
        if cfg.max_iterations is not None and s.iteration >= cfg.max_iterations:
            return False
        return s.env_steps < cfg.env_steps

    def _online_phase(self) -> None:
        cfg = self.cfg
        if not self._budget_left():
            return
        self.source = self._collection_source().start()
        bar = RateProgress("train", total=cfg.env_steps, unit="env steps")
        try:
            with bar:
                bar.update(self.state.env_steps)
                while self._budget_left():
                    self._iteration(self.source, bar)
        finally:
            for t in self.source.stop():  # read ahead of the loop: stored, not counted
                self.writer.append(t)
                self.unused_episodes += 1
            if self.unlabelled_reasons:
                why = "; ".join(f"{n} {r}" for r, n in self.unlabelled_reasons.most_common())
                log.warning(
                    "%d episodes stored unlabelled (kept out of training): %s",
                    sum(self.unlabelled_reasons.values()),
                    why,
                )
        self.checkpoint()

    def _collection_source(self) -> CollectionSource:
        """Where finished, judged episodes come from: a collector thread in this process, or
        rollout groups on a Ray cluster (``rollouts.groups``); the loop is the same."""
        cfg = self.cfg
        roster = self.population.roster(self.steering.routed)
        if cfg.rollouts.groups > 0:
            from devicerl.runtime.cluster.fleet import RolloutFleet

            return RolloutFleet(
                cfg,
                version=self.state.version,
                roster=roster,
                exploration=self.exploration,
                ledger=self.run_dir.path / "rollouts-ledger.tsv",
            )
        planner = self.planner()
        k = cfg.trajectories_per_iter
        return BackgroundCollector(
            lambda: self.make_pool(planner),
            ActingCopies(roster, self.state.version),
            judge=cfg.judge,
            on_episode=planner.record,
            on_incomplete=planner.retry,
            max_ahead=2 * k,
            overlap=cfg.overlap,
            batch=k,
        )

    def _gather(
        self, bg: CollectionSource, bar: RateProgress
    ) -> tuple[list[Trajectory], float, bool]:
        """Ingest finished episodes until an iteration's worth joined training (or the budget
        ran out); returns them, the seconds spent waiting, and whether a stop request cut the
        iteration short (what arrived is stored and in the replay)."""
        cfg, s = self.cfg, self.state
        fresh: list[Trajectory] = []
        t0 = time.perf_counter()
        while len(fresh) < cfg.trajectories_per_iter and self._budget_left():
            traj = bg.get(timeout=1.0)
            if traj is None:
                continue
            before = (s.env_steps, s.episodes, s.successes)
            fresh.extend(self._ingest(traj))
            steps = s.env_steps - before[0]
            bar.update(
                steps,
                steps=steps,
                episodes=s.episodes - before[1],
                successes=s.successes - before[2],
            )
        cut = self.stop.requested and len(fresh) < cfg.trajectories_per_iter
        return fresh, time.perf_counter() - t0, cut

    def _iteration(self, bg: CollectionSource, bar: RateProgress) -> None:
        cfg, s = self.cfg, self.state
        fresh, wait_s, cut = self._gather(bg, bar)
        if cut:
            return  # stopped while collecting: what arrived is stored and in the replay
        t1 = time.perf_counter()
        metrics: dict[str, Any] = self.population.update()
        if self.task_groups is not None:
            self.task_groups.expire(s.iteration)
            metrics["rollout/groups_waiting"] = self.task_groups.waiting
            metrics["rollout/groups_dropped"] = self.task_groups.dropped
        learn_s = time.perf_counter() - t1
        metrics["time/learner_s"] = learn_s
        s.version += 1
        s.iteration += 1
        for observer in list(self.observers):
            self.steer(observer.after_iteration(self, metrics))
            metrics.update(observer.iteration_metrics(self))
        self.publish()
        metrics.update(self._rollout_metrics(fresh, bg, wait_s, learn_s))
        self.metrics.log(metrics, s.env_steps)
        if s.iteration % cfg.checkpoint_every == 0:
            self.checkpoint()

    def _ingest(self, t: Trajectory) -> list[Trajectory]:
        """Count, store and route one trajectory; returns the fresh labelled episodes that
        joined training now (``t``, or with task groups its whole task group once it is whole)."""
        s = self.state
        s.env_steps += t.length
        self.writer.append(t)
        if not s.count(t):
            if not t.is_truncated and not is_labelled(t):
                self.unlabelled_reasons[unlabelled_reason(t)] += 1
            return []
        self.recent.append(int(t.success))
        policy = acting_policy(t)
        if policy in self.population:
            self.lags.append(self.population[policy].policy.version - t.policy_version)
        for observer in self.observers:
            observer.on_episode(self, t)
        released = [t] if self.task_groups is None else self.task_groups.hold(t, s.iteration)
        for episode in released:
            self.population.route(episode, self.steering.destinations(acting_policy(episode)))
        return released

    @property
    def recent_success(self) -> float:
        return sum(self.recent) / len(self.recent) if self.recent else 0.0

    def _rollout_metrics(
        self, fresh: list[Trajectory], bg: CollectionSource, wait_s: float, learn_s: float
    ) -> dict[str, float]:
        s = self.state
        recent_lags = self.lags[-len(fresh) :] if fresh else [0]
        out: dict[str, float] = {k: float(v) for k, v in bg.stats.items()}
        out |= s.count_metrics()  # the run's stored totals replace this session's (resume-safe)
        out |= {
            "rollout/success_rate": self.recent_success,
            "rollout/iteration_success_rate": (
                sum(t.success for t in fresh) / len(fresh) if fresh else 0.0
            ),
            "rollout/episode_length": (sum(t.length for t in fresh) / len(fresh) if fresh else 0.0),
            "train/iteration": s.iteration,
            "train/policy_version": s.version,
            "train/policy_lag": float(np.mean(recent_lags)),
            "train/replay_size": self.population.replay_size(),
            "time/wait_for_data_s": wait_s,
            "time/learner_s": learn_s,
        }
        return out

    # -- evaluation ---------------------------------------------------------------------------
    def evaluate(self) -> EvalResult:
        cfg = self.cfg
        tasks = resolve(cfg.eval_tasks)
        if cfg.tasks.max_steps:
            tasks = [t.with_max_steps(cfg.tasks.max_steps) for t in tasks]
        e = cfg.eval
        sampler = eval_sampler(tasks, e.n_tasks, e.episodes_per_task, EVAL_SEED, e.split)
        total = min(len(tasks), cfg.eval.n_tasks) * cfg.eval.episodes_per_task
        with RateProgress("eval", total=total) as bar:
            result = evaluate_policy(
                self.make_pool,
                self.actor,
                sampler,
                greedy=cfg.eval.greedy,
                judge=cfg.judge,
                on_episode=lambda t: self._eval_episode(t, bar),
            )
        (self.run_dir.path / "eval.json").write_text(scrub(json.dumps(result.as_dict(), indent=2)))
        print(result.table())
        return result

    def _eval_episode(self, t: Trajectory, bar: RateProgress) -> None:
        """Count an evaluation episode; `devicerl eval` also stores it, so its run can be
        viewed (a training run's final evaluation stays out of its store: that store is
        training data)."""
        bar.update(1, steps=t.length, successes=int(t.success))
        if self.cfg.mode == "eval":
            t.phase = "eval"
            self.writer.append(t)
        self.stop.check()  # leaves the evaluation (its devices are closed on the way out)

    # -- checkpoints --------------------------------------------------------------------------
    def checkpoint(self) -> Path | None:
        if not self.learns:
            return None
        self.population.refresh()  # updates run elsewhere: their state, into the local learners
        self.writer.flush()  # the replays' pointers must resolve in the store
        models, optims, members = self.population.checkpoint_parts()
        state = {
            "train": asdict(self.state),
            "members": members,
            "recent": list(self.recent),
            "lags": self.lags[-10_000:],
            "exploration": self.exploration.state_dict() if self.exploration else {},
        }

        def extra(folder: Path) -> None:
            for observer in self.observers:
                observer.on_checkpoint(self, folder)

        return self.ckpt.save(self.state.iteration, models, optims, state, extra=extra)

    def restore(self) -> None:
        """Continue from the newest complete checkpoint (after the observers are registered:
        each restores its own state first)."""
        ck = self.ckpt.load_latest(set_aside=self.run_dir.locked)
        if ck is None:
            log.warning("no checkpoint in %s: starting from scratch", self.ckpt.root)
            return
        if "members" not in ck.state:
            raise ConfigError(
                f"{ck.path}: a checkpoint of an older devicerl (no members); start a new run"
            )
        for observer in self.observers:
            self.steer(observer.on_restore(self, ck.path))
        store = self.run_dir.store(skip_bad=True)  # a corrupt shard costs its episodes only
        self.population.restore(ck, store)
        known = {f.name for f in fields(TrainState)}  # a counter an older version kept goes
        self.state = TrainState(**{k: v for k, v in ck.state["train"].items() if k in known})
        self.recent.extend(ck.state.get("recent", []))
        self.lags = list(ck.state.get("lags", []))
        if self.exploration is not None:
            self.exploration.load_state_dict(ck.state.get("exploration", {}))
        ck.restore_rng()
        log.info("resumed from %s (iteration %d)", ck.path, ck.iteration)
