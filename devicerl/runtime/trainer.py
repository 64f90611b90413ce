"""The training loops: offline, online, off-to-online and eval-only, resumable after kill -9.

Online, an iteration takes K fresh trajectories from the background collector (which keeps the
devices stepping meanwhile), adds them to a bounded replay buffer, runs the learner's updates
on the buffer and publishes the new weights; the collector picks them up between batches.
Every trajectory carries the version of the policy that acted; one whose version lags the
learner by ``max_policy_lag`` or more is kept in the store but not trained on: dropped when it
arrives, evicted from the replay buffer when it gets that old there (offline data excepted; see
docs/training.md, "Stale data", for why we drop rather than down-weight, and the measured lag).

Everything ingested is appended to the run's trajectory store as it arrives; checkpoints hold
weights (safetensors), optimizers, trainer state, RNG states and the replay buffer as pointers
into that store, so ``devicerl train --resume RUN_DIR`` continues where the last checkpoint was.
SIGINT / SIGTERM stop a run gracefully (`devicerl.runtime.stop`): the update in progress ends,
a checkpoint and the agent are written, the devices are closed and `Trainer.stopped` is set.
"""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from devicerl.data.replay import ReplayBuffer
from devicerl.errors import ConfigError
from devicerl.pool.pool import EnvPool
from devicerl.records import Trajectory
from devicerl.runtime.acting import BackgroundCollector, CollectionSource, WeightMailbox
from devicerl.runtime.distributed.factory import make_learner_group
from devicerl.runtime.distributed.group import GroupInfo
from devicerl.runtime.distributed.learners import LearnerGroup
from devicerl.runtime.episode_counts import EpisodeCounts
from devicerl.runtime.evaluate import EvalResult, eval_sampler, evaluate_policy
from devicerl.runtime.exploration import TaskExploration
from devicerl.runtime.learner_setup import make_learner, seed_everything
from devicerl.runtime.progress import RateProgress
from devicerl.runtime.run_dir import RunDir
from devicerl.runtime.stop import GracefulStop, StopRequested
from devicerl.runtime.train_config import TrainConfig
from devicerl.secrets import scrub
from devicerl.tasks import TaskSampler, resolve

if TYPE_CHECKING:
    from devicerl.agents.base import Policy
    from devicerl.runtime.league.acting import LeagueActors

log = logging.getLogger(__name__)

ACTOR = "actor"


@dataclass
class TrainState(EpisodeCounts):
    """Counters that a checkpoint saves and a resume restores. Its episode counts are the run's
    stored episodes (the collector's count what acting produced in this process, from zero at
    each start; both use the one `EpisodeCounts` rule)."""

    iteration: int = 0
    env_steps: int = 0
    dropped_stale: int = 0
    version: int = 0
    offline_done: int = 0


def load_offline(spec: str) -> list[Trajectory]:
    """Trajectories from run folders, stores or DigiRL ``.pt`` files (comma-separated)."""
    from devicerl.data.digirl_import import iter_digirl
    from devicerl.data.store import TrajectoryStore
    from devicerl.runtime.run_dir import find_store

    out: list[Trajectory] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        if part.endswith(".pt"):
            out.extend(iter_digirl(part))
        else:
            out.extend(TrajectoryStore(find_store(part)).read_all())
    if not out:
        raise ConfigError(f"offline_data {spec!r} holds no trajectories")
    return out


class Trainer:
    """Runs one `TrainConfig` in one run folder (see the module doc)."""

    def __init__(
        self,
        cfg: TrainConfig,
        run_dir: RunDir,
        *,
        resume: bool = False,
        group: GroupInfo | None = None,
    ) -> None:
        """``group``: this process's place in an ``accelerate launch`` (rank 0 only)."""
        self.cfg = cfg
        if cfg.torch_threads > 0:
            torch.set_num_threads(cfg.torch_threads)
        seed_everything(cfg.seed)
        self.learners: LearnerGroup | None = None  # where the learner's updates run
        self._build_learning(group)
        self.run_dir = run_dir  # created (and locked) by `run`: building writes nothing
        self.replay = ReplayBuffer(cfg.replay_capacity, max_lag=cfg.max_policy_lag or None)
        self.state = TrainState()
        if self.learner is not None:  # schedules follow this run's versions, not a saved
            self.actor.version = self.state.version  # agent's own count (its pre-training)
        self.ckpt = run_dir.checkpoint_manager(keep=cfg.keep_checkpoints)
        self.recent: deque[int] = deque(maxlen=100)
        self.lags: list[int] = []
        self.exploration = TaskExploration.from_config(cfg.exploration)
        self.eval_result: EvalResult | None = None
        self.stop = GracefulStop()
        if resume:
            self._restore()

    def _build_learning(self, group: GroupInfo | None) -> None:
        """The acting policy and its learner (a league run builds its policies instead)."""
        cfg = self.cfg
        if cfg.mode == "eval" and cfg.eval.policy:
            self.actor = self._league_policy(cfg.eval.policy)
        else:
            self.actor = cfg.agent.make()
        self.learner = make_learner(cfg, self.actor) if cfg.mode != "eval" else None
        if self.learner is not None:
            self.learners = make_learner_group(cfg, self.learner, self.actor, group)

    def _league_policy(self, name: str) -> Any:
        """Policy ``name`` of the saved league in ``eval.league`` (a run or league folder)."""
        from devicerl.league.persist import STATE, load_league

        if not self.cfg.eval.league:
            raise ConfigError(f"eval.policy={name}: set eval.league to the run that holds it")
        root = Path(self.cfg.eval.league)
        folder = root / "league" if (root / "league" / STATE).exists() else root
        league, _ = load_league(folder)
        if name not in league:
            known = ", ".join(league.members)
            raise ConfigError(f"eval.policy: no policy {name!r} in {folder} ({known})")
        return league[name].policy

    # -- devices ------------------------------------------------------------------------------
    def make_pool(self, sampler: TaskSampler) -> EnvPool:
        return self.cfg.env.make_pool(sampler, seed=self.cfg.seed)

    def _train_sampler(self) -> TaskSampler:
        tasks = resolve(self.cfg.tasks.train)
        seed = self.cfg.seed * 1_000_003 + self.state.iteration  # a resume draws new instances
        return TaskSampler(tasks, seed=seed, max_steps=self.cfg.tasks.max_steps, seeds="train")

    def _judge_runner(self) -> Any:
        if self.cfg.judge.kind == "native":
            return None
        from devicerl.judges.factory import make_runner

        return make_runner(self.cfg.judge)

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
            # a shard per finished episode (a crash loses only episodes in flight); a
            # checkpoint flushes first, so the replay pointers it saves always resolve
            self.run_dir.writer(background=True) as self.writer,
            self.run_dir.metrics_logger(cfg.logging, run_config=cfg) as self.metrics,
        ):
            try:
                if cfg.mode in ("offline", "off2on"):
                    self._offline_phase()
                if cfg.mode in ("online", "off2on") and not self.stop.requested:
                    self._online_phase()
            finally:
                self._close_learners()
            self._save_agent()  # before evaluating: a failed eval loses no agent
            evaluates = cfg.mode == "eval" or (cfg.eval.at_end and cfg.eval.n_tasks > 0)
            if evaluates and not self.stop.requested:
                try:
                    self.eval_result = self.evaluate()
                except StopRequested:
                    log.warning("evaluation stopped by %s: no eval.json", self.stop.name)
                else:
                    self.metrics.log(self._eval_metrics(self.eval_result), self.state.env_steps)
        summary = self.summary(time.perf_counter() - t0)
        (self.run_dir.path / "summary.json").write_text(scrub(json.dumps(summary, indent=2)))
        return summary

    def _close_learners(self) -> None:
        if self.learners is not None:
            self.learners.close()  # other learner processes stop

    def _save_agent(self) -> None:
        if self.learner is not None:
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
        if self.stopped:
            out["stopped_by"] = self.stopped
        if self.eval_result is not None:
            out["eval"] = self.eval_result.as_dict()
        return out

    # -- offline ------------------------------------------------------------------------------
    def _offline_phase(self) -> None:
        cfg = self.cfg
        if self.state.offline_done >= cfg.offline_iterations:
            return
        if not len(self.replay):
            data = load_offline(cfg.offline_data)
            for t in data:
                self.writer.append(t)  # so the replay's pointers resolve after a resume
                self.replay.add(t, offline=True)  # given data: no policy-lag limit
            self.writer.flush()
        assert self.learners is not None
        with RateProgress("offline", total=cfg.offline_iterations, unit="iterations") as bar:
            bar.update(self.state.offline_done)
            while self.state.offline_done < cfg.offline_iterations and not self.stop.requested:
                metrics = self.learners.update(list(self.replay))
                self.state.offline_done += 1
                self.state.iteration += 1
                self._next_version()
                self.metrics.log(metrics, self.state.env_steps)
                bar.update(1, loss=metrics.get("train/actor_loss", float("nan")))
                if self.state.iteration % cfg.checkpoint_every == 0:
                    self.checkpoint()
        self.checkpoint()

    def _next_version(self) -> None:
        """A new policy version; the learner's actor carries it too (it is saved with the
        agent)."""
        self.state.version += 1
        self.actor.version = self.state.version

    def _add_to_replay(self, t: Trajectory) -> None:
        self.replay.add(t)

    # -- online -------------------------------------------------------------------------------
    def _budget_left(self) -> bool:
        cfg, s = self.cfg, self.state
        if self.stop.requested:
            return False
        if cfg.max_iterations and s.iteration >= cfg.max_iterations:
            return False
        return s.env_steps < cfg.env_steps

    def _online_phase(self) -> None:
        cfg = self.cfg
        if not self._budget_left():
            return
        source = self._collection_source().start()
        bar = RateProgress("train", total=cfg.env_steps, unit="env steps")
        try:
            with bar:
                bar.update(self.state.env_steps)
                while self._budget_left():
                    self._iteration(source, bar)
        finally:
            for t in source.stop():  # finished but not consumed: stored, never trained on
                self._ingest(t, train=False)
        self.checkpoint()

    def _collection_source(self) -> CollectionSource:
        """Where finished episodes come from: a collector thread in this process, or rollout
        groups on a Ray cluster (``rollouts.groups``); the loop is the same."""
        cfg = self.cfg
        weights = self.actor.get_weights() if self.learner is not None else None
        if cfg.rollouts.groups > 0:
            from devicerl.runtime.cluster.fleet import RolloutFleet

            return RolloutFleet(cfg, version=self.state.version, weights=weights)
        acting = cfg.agent.make()
        if weights is not None:
            acting.set_weights(weights, self.state.version)
        return self._collector(lambda: self.make_pool(self._train_sampler()), acting)

    def _collector(
        self,
        make_pool: Callable[[], EnvPool],
        acting: Policy | None,
        league: LeagueActors | None = None,
    ) -> BackgroundCollector:
        """A collector thread acting with ``acting`` (or ``league``'s members) on the pools
        ``make_pool`` starts, ``trajectories_per_iter`` finished episodes per batch."""
        cfg = self.cfg
        k = cfg.trajectories_per_iter
        mailbox = WeightMailbox()
        mailbox.version = self.state.version
        return BackgroundCollector(
            make_pool,
            acting,
            mailbox,
            judge=self._judge_runner(),
            max_ahead=cfg.max_ahead or 2 * k,
            overlap=cfg.overlap,
            batch=k,
            exploration=self.exploration,
            league=league,
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
            if self._ingest(traj):
                fresh.append(traj)
            steps = s.env_steps - before[0]
            bar.update(
                steps,
                steps=steps,
                episodes=s.episodes - before[1],
                successes=s.successes - before[2],
            )
        cut = self.stop.requested and len(fresh) < cfg.trajectories_per_iter
        return fresh, time.perf_counter() - t0, cut

    def _iteration(self, bg: CollectionSource, bar: RateProgress):
        cfg, s = self.cfg, self.state
        fresh, wait_s, cut = self._gather(bg, bar)
        if cut:
            return  # stopped while collecting: what arrived is stored and in the replay
        t1 = time.perf_counter()
        metrics: dict[str, Any] = {}
        # the lag limit holds inside the replay too: nothing this old is ever trained on
        evicted = len(self.replay.evict_stale(s.version))
        if self.learners is not None and len(self.replay):
            metrics = self.learners.update(list(self.replay))
        metrics["train/replay_evicted_stale"] = evicted
        learn_s = time.perf_counter() - t1
        self._next_version()
        s.iteration += 1
        weights = self.actor.get_weights() if self.learner is not None else None
        bg.publish(weights, s.version)
        metrics.update(self._rollout_metrics(fresh, bg, wait_s, learn_s))
        self.metrics.log(metrics, s.env_steps)
        if s.iteration % cfg.checkpoint_every == 0:
            self.checkpoint()

    def _store(self, t: Trajectory) -> bool:
        """Count and store one trajectory; True when it is a complete labelled episode."""
        self.state.env_steps += t.length
        self.writer.append(t)
        if not self.state.add(t):
            return False
        self.recent.append(int(t.success))
        return True

    def _ingest(self, t: Trajectory, train: bool = True) -> bool:
        """Count and store one trajectory; True when it joins the replay buffer."""
        if not self._store(t):
            return False
        s = self.state
        lag = s.version - t.policy_version
        self.lags.append(lag)
        if self.cfg.max_policy_lag and lag >= self.cfg.max_policy_lag:
            s.dropped_stale += 1
            return False
        if train:
            self._add_to_replay(t)
        return train

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
            "train/dropped_stale": s.dropped_stale,
            "train/replay_size": len(self.replay),
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
        sampler = eval_sampler(tasks, e.n_tasks, e.episodes_per_task, e.seed, e.split)
        total = min(len(tasks), cfg.eval.n_tasks) * cfg.eval.episodes_per_task
        with RateProgress("eval", total=total) as bar:
            result = evaluate_policy(
                self.make_pool,
                self.actor,
                sampler,
                greedy=cfg.eval.greedy,
                judge=self._judge_runner(),
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
            t.extras["phase"] = "eval"
            self.writer.append(t)
        self.stop.check()  # leaves the evaluation (its devices are closed on the way out)

    @staticmethod
    def _eval_metrics(result: EvalResult) -> dict[str, float]:
        lo, hi = result.interval
        return {
            "eval/success_rate": result.success_rate,
            "eval/ci95_low": lo,
            "eval/ci95_high": hi,
            "eval/episodes": result.episodes,
        }

    # -- checkpoints --------------------------------------------------------------------------
    def checkpoint(self) -> Path | None:
        if self.learner is None or self.learners is None:
            return None
        self.learners.refresh()  # the learner group's state, into the local learner
        self.writer.flush()  # the replay's pointers must resolve in the store
        models = {ACTOR: self.actor.get_weights()}
        models.update({k: m.state_dict() for k, m in self.learner.modules().items()})
        optims = {k: o.state_dict() for k, o in self.learner.optimizers().items()}
        state = {
            "train": asdict(self.state),
            "replay": self.replay.state_dict(),
            "learner": self.learner.state_dict(),
            "recent": list(self.recent),
            "lags": self.lags[-10_000:],
            "exploration": self.exploration.state_dict() if self.exploration else {},
        }
        return self.ckpt.save(self.state.iteration, models, optims, state)

    def _restore(self) -> None:
        ck = self.ckpt.load_latest(set_aside=self.run_dir.locked)
        if ck is None:
            log.warning("no checkpoint in %s: starting from scratch", self.ckpt.root)
            return
        self.actor.set_weights(ck.models[ACTOR], ck.state["train"]["version"])
        if self.learner is not None:
            for name, module in self.learner.modules().items():
                module.load_state_dict(ck.models[name])
            for name, opt in self.learner.optimizers().items():
                if name in ck.optimizers:
                    opt.load_state_dict(ck.optimizers[name])
            self.learner.load_state_dict(ck.state.get("learner", {}))
        self.state = TrainState(**ck.state["train"])
        store = self.run_dir.store(skip_bad=True)  # a corrupt shard costs its episodes only
        self.replay.load_state_dict(ck.state["replay"], store, strict=False)
        self.recent.extend(ck.state.get("recent", []))
        self.lags = list(ck.state.get("lags", []))
        if self.exploration is not None:
            self.exploration.load_state_dict(ck.state.get("exploration", {}))
        ck.restore_rng()
        log.info("resumed from %s (iteration %d)", ck.path, ck.iteration)
