"""`Collector`: runs policies on an `EnvPool` and yields complete trajectories.

Each round it takes whatever devices are ready and asks each policy for the actions of all its
ready devices in one batched call, sends them, and hands out the episodes that ended. Every
episode carries its `EpisodePlan` (the pool gets it from the planner, `devicerl.runtime.
planning`): which policy acts, at which exploration level (passed to `Policy.act` as
``epsilon``, only when some plan asks for exploration), greedily or not. Every step records the
version of the policy that chose it and its share of the agent's time.

Policies come from a `PolicySource`: a fixed policy (`Collector(pool, policy)`), or the acting
copies a trainer keeps up to date (`devicerl.runtime.acting.copies.ActingCopies`: new weights
are applied between batches, so no batch mixes two versions of a policy).

Episodes come out as the devices labelled them; a judge, when the run has one, labels them
after the collector (`devicerl.runtime.acting.judging.JudgingStage`), once. A policy that
declares ``uses_episodes`` gets each observation's episode key (``episodes=``), so it can keep
per-episode state (the API agent's failure budget).
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from devicerl.actions import Action
from devicerl.agents.base import Policy, as_policy
from devicerl.errors import ConfigError
from devicerl.pool.pool import EnvPool
from devicerl.records import (
    DEFAULT_POLICY,
    EpisodePlan,
    Observation,
    Trajectory,
    with_previous_actions,
)
from devicerl.runtime.acting.episode_counts import EpisodeCounts

PolicyLike = Policy | Callable[[list[Observation]], Sequence[Action]]


class PolicySource(Protocol):
    """The policies a collector acts with, by name, current as of the next batch."""

    def current(self, in_use: set[str]) -> Mapping[str, Policy]:
        """The acting policies (``in_use``: the names of the episodes running now)."""
        ...


class FixedPolicy:
    """One policy under `DEFAULT_POLICY`, as it is."""

    def __init__(self, policy: PolicyLike) -> None:
        self.policies = {DEFAULT_POLICY: as_policy(policy)}

    def current(self, in_use: set[str]) -> Mapping[str, Policy]:
        return self.policies


@dataclass
class CollectorStats(EpisodeCounts):
    """Running counters a logger can read: the episodes this collector handed out (with the
    devices' labels) and the pool's steps and device faults; `as_dict` gives both under their
    final metric names."""

    env_steps: int = 0
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
        """The counters under the metric names a run logs (`devicerl.runtime.runs.metrics`)."""
        return {
            "pool/env_steps": self.env_steps,
            "pool/steps_per_s": self.steps_per_s,
            "pool/restarts": self.restarts,
            "pool/retired": self.retired,
            "pool/agent_time_share": self.agent_time_share,
            "pool/mean_batch": self.actions / self.batches if self.batches else 0.0,
            **self.count_metrics(),
            "rollout/success_rate": self.success_rate,
        }


@dataclass
class DeviceSlot:
    """One device's episode as the collector sees it: its plan, the actions taken so far, and
    the observation waiting for an action (None while the device steps)."""

    plan: EpisodePlan
    history: list[Action] = field(default_factory=list)
    waiting: Observation | None = None
    #: the episode's `DeviceEnv.oracle`, handed only to policies that declare ``uses_oracle``
    oracle: Any = None
    #: the episode's key for policies that declare ``uses_episodes`` (unique per collector)
    key: int = 0


class Collector:
    """Drives ``pool`` with ``policy`` (a `Policy`, a callable observations -> actions, or a
    `PolicySource` of named policies)."""

    def __init__(
        self,
        pool: EnvPool,
        policy: PolicyLike | PolicySource,
        *,
        greedy: bool = False,
        poll_s: float = 0.5,
    ) -> None:
        self.pool = pool
        self.source: PolicySource = (
            policy if callable(getattr(policy, "current", None)) else FixedPolicy(policy)  # type: ignore[arg-type]
        )
        self.greedy = greedy
        self.poll_s = poll_s
        self.stats = CollectorStats()
        self.slots: dict[int, DeviceSlot] = {}
        self._keys = itertools.count(1)
        self._ready: dict[int, None] = {}  # devices waiting for an action, in the order they came
        self._backlog: deque[Trajectory] = deque()
        self._base = {"steps": pool.counters["steps"], "restarts": pool.supervisor.restarts}

    def collect(self, n_episodes: int | None = None, stop: Any = None) -> Iterator[Trajectory]:
        """Yield trajectories until ``n_episodes`` complete ones were yielded (None: until the
        task source runs out) or ``stop`` (a `threading.Event`) is set. Truncated episodes are
        yielded too, and not counted."""
        done = 0
        while n_episodes is None or done < n_episodes:
            if stop is not None and stop.is_set():
                return
            if not self._backlog:
                if self.pool.done and not self._ready:
                    return
                self._round()
                continue
            traj = self._backlog.popleft()
            done += self.stats.count(traj)
            yield traj

    def run(self, n_episodes: int | None = None) -> list[Trajectory]:
        """`collect` into a list."""
        return list(self.collect(n_episodes))

    # -- one round: receive, act on every ready device, send ---------------------------------
    def _round(self) -> None:
        for r in self.pool.recv(min_ready=1, timeout=self.poll_s):
            if r.trajectory is not None:
                self._backlog.append(r.trajectory)
            if r.first:  # a new episode (after an end or a device restart)
                plan = r.plan or EpisodePlan()
                self.slots[r.env_id] = DeviceSlot(plan, oracle=r.oracle, key=next(self._keys))
            slot = self.slots.get(r.env_id)
            if slot is not None:
                slot.waiting = r.observation
            if r.observation is not None:
                self._ready[r.env_id] = None
            else:
                self._ready.pop(r.env_id, None)
        self.stats.env_steps = self.pool.counters["steps"] - self._base["steps"]
        self.stats.restarts = self.pool.supervisor.restarts - self._base["restarts"]
        self.stats.retired = len(self.pool.retired)
        if self._ready:
            ids, self._ready = list(self._ready), {}
            self._act(ids)

    def _act(self, ids: list[int]) -> None:
        """One batched `act` per (policy, greedy) group of ready devices, one `send` each."""
        groups: dict[tuple[str, bool], list[int]] = {}
        for i in ids:
            plan = self.slots[i].plan
            greedy = self.greedy if plan.greedy is None else plan.greedy
            groups.setdefault((plan.policy, greedy), []).append(i)
        policies = self.source.current({s.plan.policy for s in self.slots.values()})
        t0 = time.perf_counter()
        acted = []
        for (name, greedy), group in groups.items():
            policy = policies.get(name)
            if policy is None:
                raise ConfigError(f"device {group[0]}: its episode's policy {name!r} is unknown")
            slots = [self.slots[i] for i in group]
            observations = [s.waiting for s in slots]
            if policy.uses_history:  # a copy: the stored step keeps the device's observation
                observations = [
                    with_previous_actions(o, s.history) for o, s in zip(observations, slots)
                ]
            kwargs: dict[str, Any] = {}
            if any(s.plan.epsilon > 0 for s in slots):  # only when asked (see `Policy.act`)
                kwargs["epsilon"] = [s.plan.epsilon for s in slots]
            if getattr(policy, "uses_oracle", False):  # a demonstrator: the tasks' solutions
                kwargs["oracle"] = [s.oracle for s in slots]
            if getattr(policy, "uses_episodes", False):  # per-episode state (a budget)
                kwargs["episodes"] = [s.key for s in slots]
            samples = policy.act(observations, greedy=greedy, **kwargs)
            if len(samples) != len(group):
                raise ValueError(f"{name}: {len(samples)} actions for {len(group)} devices")
            acted.append((group, samples, policy.version))
        dt = time.perf_counter() - t0
        for group, samples, version in acted:
            for i, sample in zip(group, samples):
                self.slots[i].history.append(sample.action)
                self.slots[i].waiting = None
            self.pool.send(samples, group, policy_version=version, agent_time_s=dt / len(ids))
        self.stats.agent_time_s += dt
        self.stats.actions += len(ids)
        self.stats.batches += 1

    def summary(self) -> dict[str, Any]:
        return {**self.stats.as_dict(), "pool": self.pool.stats()}
