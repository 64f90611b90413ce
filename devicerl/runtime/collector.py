"""`Collector`: runs an agent on an `EnvPool` and yields complete trajectories.

Each round it takes whatever devices are ready, asks the policy for all their actions in one
batched call, sends them, and hands out the episodes that ended. Every step records the
policy's ``version`` and its share of the agent's time. A trainer publishes new weights with
`Collector.set_policy` (or a ``policy_source`` callable polled each round); the swap happens
between batches, so no batch mixes two policies.

With a ``judge`` (a `devicerl.judges.JudgeRunner`, e.g. ``make_runner(config.judge)``) every
finished episode is handed to it without waiting, and comes out of `collect` once judged,
relabelled from the verdict (success, rewards, a per-step cut). Judging never blocks the
devices: `collect` keeps stepping them while verdicts are pending. Episodes the judge could not
label (``devicerl.judges.is_labelled`` is False) are yielded like truncated ones: not counted
towards ``n_episodes`` nor in the success rate; keep them out of training.

With an ``exploration`` (`devicerl.runtime.exploration.TaskExploration`) every episode gets an
exploration level from its task's recent success, passed to the policy as
``observation.extras["explore"]``; every labelled episode is recorded there. A probe the
exploration asks to act greedily (``probe_greedy``) is acted in a separate greedy `act` call and
its trajectory carries ``extras["greedy"] = True``.

With a ``league`` (`devicerl.runtime.league.acting.LeagueActors`) each new episode is assigned a
policy, the ready devices' inference is batched per policy (one `act` call each,
`devicerl.league.acting.act_per_policy`), every step records its policy's version and the
finished trajectory names its policy in ``extras["policy"]``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from devicerl.actions import Action
from devicerl.agents.base import ActionSample, Policy, as_policy
from devicerl.judges import Judged, JudgeRunner
from devicerl.league.acting import POLICY_KEY, act_per_policy, group_by_policy
from devicerl.pool.pool import EnvPool
from devicerl.records import Observation, Trajectory, with_previous_actions
from devicerl.runtime.episode_counts import EpisodeCounts
from devicerl.runtime.exploration import EXPLORE_KEY, GREEDY_KEY, TaskExploration

if TYPE_CHECKING:
    from devicerl.runtime.league.acting import LeagueActors

PolicyLike = Policy | Callable[[list[Observation]], Sequence[Action]]


@dataclass
class CollectorStats(EpisodeCounts):
    """Running counters a logger can read: the episodes this collector handed out (counted after
    judging, so successes are the judged ones) and the pool's steps and device faults;
    `as_dict` gives both under their final metric names."""

    env_steps: int = 0
    judge_pending: int = 0  #: episodes handed to the judge and not yet back
    restarts: int = 0
    retired: int = 0
    agent_time_s: float = 0.0
    actions: int = 0
    batches: int = 0
    started_at: float = field(default_factory=time.perf_counter)

    @property
    def elapsed_s(self) -> float:
        return time.perf_counter() - self.started_at

    @property
    def steps_per_s(self) -> float:
        return self.env_steps / max(self.elapsed_s, 1e-9)

    @property
    def agent_time_share(self) -> float:
        """Fraction of wall time spent inside the policy."""
        return self.agent_time_s / max(self.elapsed_s, 1e-9)

    def as_dict(self) -> dict[str, float]:
        """The counters under the metric names a run logs (`devicerl.runtime.metrics`)."""
        return {
            "pool/env_steps": self.env_steps,
            "pool/steps_per_s": self.steps_per_s,
            "pool/restarts": self.restarts,
            "pool/retired": self.retired,
            "pool/agent_time_share": self.agent_time_share,
            "pool/mean_batch": self.actions / self.batches if self.batches else 0.0,
            **self.count_metrics(),
            "rollout/success_rate": self.success_rate,
            "judge/pending": self.judge_pending,
        }


class Collector:
    """Drives ``pool`` with ``policy`` (a `Policy` or a callable observations -> actions), or
    with the policies of a ``league`` (``policy`` None)."""

    def __init__(
        self,
        pool: EnvPool,
        policy: PolicyLike | None,
        *,
        greedy: bool = False,
        policy_source: Callable[[], PolicyLike | None] | None = None,
        poll_s: float = 0.5,
        judge: JudgeRunner | None = None,
        exploration: TaskExploration | None = None,
        league: LeagueActors | None = None,
    ) -> None:
        self.pool = pool
        self.league = league
        self._policy_of: dict[int, str] = {}  # in a league: the policy of each device's episode
        self.judge = judge
        self.exploration = exploration
        if policy is None and league is None:
            raise ValueError("a collector needs a policy (or a league)")
        self.policy = as_policy(policy) if policy is not None else None  # type: ignore[assignment]
        self.greedy = greedy
        self.policy_source = policy_source
        self.poll_s = poll_s
        self.stats = CollectorStats()
        self._lock = threading.Lock()
        self._next_policy: Policy | None = None
        self._waiting: dict[int, Observation] = {}
        self._history: dict[int, list[Action]] = {}  # actions of each device's episode so far
        self._explore: dict[int, float] = {}  # exploration level of each device's episode
        self._greedy_probe: set[int] = set()  # devices whose episode is a greedy probe
        self._backlog: deque[Trajectory] = deque()
        self._base = {"steps": pool.counters["steps"], "restarts": pool.supervisor.restarts}

    def set_policy(self, policy: PolicyLike) -> None:
        """Use ``policy`` from the next batch on (safe to call from another thread)."""
        with self._lock:
            self._next_policy = as_policy(policy)

    def collect(
        self, n_episodes: int | None = None, stop: threading.Event | None = None
    ) -> Iterator[Trajectory]:
        """Yield trajectories until ``n_episodes`` complete ones were yielded (None: until the
        task sampler runs out) or ``stop`` is set. Truncated episodes are yielded too, and not
        counted."""
        done = 0
        while n_episodes is None or done < n_episodes:
            if stop is not None and stop.is_set():
                return
            if not self._backlog:
                if self.pool.done and not self._waiting:
                    if self.judge is None or not self.judge.pending:
                        return
                    self._take_judged(self.judge.drain(timeout=self.poll_s))
                    continue
                self._round()
                continue
            traj = self._backlog.popleft()
            done += self._emit(traj)
            yield traj

    def run(self, n_episodes: int | None = None) -> list[Trajectory]:
        """`collect` into a list."""
        return list(self.collect(n_episodes))

    # -- one round: receive, act on every ready device, send ---------------------------------
    def _round(self) -> None:
        for r in self.pool.recv(min_ready=1, timeout=self.poll_s):
            if r.trajectory is not None and r.env_id in self._explore:
                # the level every step of this episode acted with, stored with it
                r.trajectory.extras[EXPLORE_KEY] = self._explore[r.env_id]
                if r.env_id in self._greedy_probe:
                    r.trajectory.extras[GREEDY_KEY] = True
            if r.trajectory is not None and r.trajectory.steps and r.env_id in self._policy_of:
                r.trajectory.extras[POLICY_KEY] = self._policy_of[r.env_id]
            if r.trajectory is not None and self.judge is not None:
                self.judge.submit(r.trajectory)  # returns at once; back through poll()
            elif r.trajectory is not None:
                self._backlog.append(r.trajectory)
            if r.first:  # a new episode (after an end or a device restart)
                self._history[r.env_id] = []
                if self.exploration is not None:
                    self._explore[r.env_id], greedy = self.exploration.plan(r.task)
                    if greedy:
                        self._greedy_probe.add(r.env_id)
                    else:
                        self._greedy_probe.discard(r.env_id)
                if self.league is not None and r.task is not None:
                    self._policy_of[r.env_id] = self.league.assign(r.task, r.seed)
            if r.observation is not None:
                self._waiting[r.env_id] = r.observation
            elif r.env_id in self._waiting:
                del self._waiting[r.env_id]
        self.stats.env_steps = self.pool.counters["steps"] - self._base["steps"]
        self.stats.restarts = self.pool.supervisor.restarts - self._base["restarts"]
        self.stats.retired = len(self.pool.retired)
        if self.judge is not None:
            self._take_judged(self.judge.poll())
        if self._waiting:
            self._act()

    def _act(self) -> None:
        if self.league is not None:
            self._act_league()
            return
        policy = self._current_policy()
        ids = list(self._waiting)
        observations = [self._waiting.pop(i) for i in ids]
        if policy.uses_history:  # a copy: the stored step keeps the device's observation
            observations = [
                with_previous_actions(obs, self._history.setdefault(i, []))
                for i, obs in zip(ids, observations)
            ]
        if self._explore:
            observations = [
                replace(obs, extras={**obs.extras, EXPLORE_KEY: self._explore.get(i, 0.0)})
                for i, obs in zip(ids, observations)
            ]
        t0 = time.perf_counter()
        of = dict(zip(ids, observations))
        by_id: dict[int, ActionSample] = {}
        for group, greedy in self._greedy_groups(ids):
            acted = policy.act([of[i] for i in group], greedy=greedy)
            if len(acted) != len(group):
                raise ValueError(f"policy returned {len(acted)} actions for {len(group)} devices")
            by_id.update(zip(group, acted))
        samples = [by_id[i] for i in ids]
        dt = time.perf_counter() - t0
        for i, sample in zip(ids, samples):
            self._history.setdefault(i, []).append(getattr(sample, "action", sample))
        self.pool.send(samples, ids, policy_version=policy.version, agent_time_s=dt / len(ids))
        self.stats.agent_time_s += dt
        self.stats.actions += len(ids)
        self.stats.batches += 1

    def _act_league(self) -> None:
        """One batched `act` per policy over the ready devices, one `send` per policy."""
        assert self.league is not None
        policies = self.league.sync(set(self._policy_of.values()))
        ids = list(self._waiting)
        observations: dict[int, Observation] = {}
        for i in ids:
            obs = self._waiting.pop(i)
            acting = policies.get(self._policy_of.get(i, ""))
            if acting is not None and acting.uses_history:
                obs = with_previous_actions(obs, self._history.setdefault(i, []))
            if self._explore:
                obs = replace(obs, extras={**obs.extras, EXPLORE_KEY: self._explore.get(i, 0.0)})
            observations[i] = obs
        t0 = time.perf_counter()
        samples: dict[int, ActionSample] = {}
        for group, greedy in self._greedy_groups(ids):
            some = {i: observations[i] for i in group}
            samples.update(act_per_policy(policies, some, self._policy_of, greedy=greedy))
        dt = time.perf_counter() - t0
        for group in group_by_policy({i: self._policy_of[i] for i in ids}).values():
            for i in group:
                self._history.setdefault(i, []).append(samples[i].action)
            version = int(samples[group[0]].extras["policy_version"])
            group_samples = [samples[i] for i in group]
            self.pool.send(group_samples, group, policy_version=version, agent_time_s=dt / len(ids))
        self.stats.agent_time_s += dt
        self.stats.actions += len(ids)
        self.stats.batches += 1

    def _greedy_groups(self, ids: list[int]) -> list[tuple[list[int], bool]]:
        """The ready devices split into the ones acted as configured and the greedy probes,
        each with its ``greedy`` flag (empty groups left out)."""
        probes = [i for i in ids if i in self._greedy_probe]
        rest = [i for i in ids if i not in self._greedy_probe]
        return [(g, greedy) for g, greedy in ((rest, self.greedy), (probes, True)) if g]

    def _current_policy(self) -> Policy:
        if self.policy_source is not None:
            fresh = self.policy_source()
            if fresh is not None:
                self.set_policy(fresh)
        with self._lock:
            if self._next_policy is not None:
                self.policy, self._next_policy = self._next_policy, None
        return self.policy

    def _take_judged(self, judged: list[Judged]) -> None:
        self._backlog.extend(j.trajectory for j in judged)
        assert self.judge is not None
        self.stats.judge_pending = self.judge.pending

    def _emit(self, traj: Trajectory) -> bool:
        """Count a finished trajectory where it leaves the collector (judged, if judging); True
        when it is a complete, labelled episode."""
        complete = self.stats.add(traj)
        if complete and self.exploration is not None:
            self.exploration.record(traj.task, traj.success, traj.extras.get(EXPLORE_KEY, 0.0))
        return complete

    def summary(self) -> dict[str, Any]:
        return {**self.stats.as_dict(), "pool": self.pool.stats()}
