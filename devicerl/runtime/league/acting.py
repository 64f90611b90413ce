"""The collector's side of a league: which policy plays each new episode, which task it plays
(frontier sampling), and the acting copies of the policies.

The trainer thread owns the `League` and the live (learning) policies; the collector thread acts
with its own copies, one per policy at one version, updated between batches from what the
trainer publishes (as the single-policy `WeightMailbox` does). A frozen policy is acted with
its league object itself: it never changes, so one copy serves the league and the collector. A
removed policy's copy stays until the episodes it is playing end (they are stored, trained on
by no one), then goes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from devicerl.agents.base import Policy
from devicerl.errors import ConfigError
from devicerl.league.config import PolicySpec
from devicerl.league.frontier import FrontierSampler
from devicerl.league.hparams import apply_to_policy
from devicerl.league.state import Frozen, League
from devicerl.records import Task, TaskInstance
from devicerl.tasks import TaskSampler


@dataclass
class Published:
    """One member as the trainer publishes it to the collector."""

    weights: dict[str, Any] | None  #: None: frozen, acted with as it is
    version: int
    make: Callable[[], Policy]  #: a fresh acting copy
    spec: PolicySpec  #: its exploration level (PBT changes it) reaches the copy


class LeagueTaskSampler(TaskSampler):
    """Frontier sampling for the pool: each new episode first gets a policy (by the mapping's
    weights), then that policy's `FrontierSampler` draws the task among the tasks the mapping
    routes to it. The chosen policy is kept per instance for the collector (`policy_for`)."""

    def __init__(
        self,
        league: League,
        lock: threading.RLock,
        tasks: Sequence[Task],
        seed: int = 0,
        max_steps: int | None = None,
        seeds: tuple[int, int] | str | None = "train",
    ) -> None:
        super().__init__(tasks, seed=seed, max_steps=max_steps, seeds=seeds)
        self.league = league
        self.lock = lock
        self.by_name = {t.name: t for t in self.tasks}
        self.frontier = FrontierSampler(league.success, league.config.frontier.floor, seed=seed + 1)
        self.chosen: dict[tuple[str, int], str] = {}

    def shares(self) -> dict[str, float]:
        """Each policy's share of new episodes: the weights of its rules that reach a task."""
        out: dict[str, float] = {}
        for rule in self.league.mapping.rules:
            if rule.policy in self.league and any(
                rule in self.league.mapping.candidates(t) for t in self.by_name
            ):
                out[rule.policy] = out.get(rule.policy, 0.0) + rule.weight
        return out

    def next(self) -> TaskInstance | None:
        with self.lock:
            shares = self.shares()
            if not shares:
                raise ConfigError("league.mapping: no policy plays any of the run's tasks")
            names = sorted(shares)
            policy = self._rng.choices(names, [shares[n] for n in names])[0]
            tasks = self.league.mapping.tasks_of(policy, list(self.by_name))
            task = self.frontier.sample(policy, tasks)
        lo, hi = self.seed_range
        inst = TaskInstance(self.by_name[task], lo + self._rng.randrange(hi - lo))
        if len(self.chosen) > 10_000:  # resets that never came back: forget the oldest
            self.chosen.pop(next(iter(self.chosen)))
        self.chosen[(task, inst.seed)] = policy
        return inst

    def policy_for(self, task: str, seed: int | None) -> str | None:
        return self.chosen.pop((task, seed), None) if seed is not None else None


class LeagueActors:
    """What the collector asks of a league: a policy for each new episode and the acting
    copies to batch inference with (`devicerl.league.acting.act_per_policy`)."""

    def __init__(
        self, league: League, lock: threading.RLock, sampler: LeagueTaskSampler | None = None
    ) -> None:
        self.league = league
        self.lock = lock
        self.sampler = sampler
        self.policies: dict[str, Policy] = {}
        self._roster: dict[str, Published] | None = None
        self._mail_lock = threading.Lock()
        self._leaving: set[str] = set()

    # -- trainer thread -----------------------------------------------------------------------
    def publish(self, roster: Mapping[str, Published]) -> None:
        """The league's members now (newest wins): weights and version of each trainable one,
        None for a frozen one (acted with as it is)."""
        with self._mail_lock:
            self._roster = dict(roster)

    # -- collector thread ---------------------------------------------------------------------
    def assign(self, task: str, seed: int | None = None) -> str:
        """The policy of a new episode: the one frontier sampling drew it for, else the
        mapping's choice for its task."""
        chosen = self.sampler.policy_for(task, seed) if self.sampler is not None else None
        with self.lock:
            if chosen is not None and chosen in self.league:
                return chosen
            return self.league.assign(task)

    def sync(self, in_use: set[str]) -> dict[str, Policy]:
        """Apply the newest roster (new copies, new weights, departures whose episodes ended);
        returns the acting copies by name."""
        with self._mail_lock:
            roster, self._roster = self._roster, None
        if roster is not None:
            for name, pub in roster.items():
                policy = self.policies.get(name)
                fresh = policy is None
                if policy is None:
                    policy = self.policies[name] = pub.make()
                if pub.weights is not None and (fresh or policy.version != pub.version):
                    policy.set_weights(pub.weights, pub.version)
                    apply_to_policy(policy, pub.spec)
            self._leaving = set(self.policies) - set(roster)
        for name in list(self._leaving):
            if name not in in_use:
                self.policies.pop(name, None)
                self._leaving.discard(name)
        return self.policies


def published(spec: PolicySpec, live: Policy) -> Published:
    """How the trainer publishes a member: a trainable one's weights (copied now, in the trainer
    thread) for a fresh copy built from its spec; a frozen one as itself (it never changes)."""
    if isinstance(live, Frozen):
        return Published(None, live.version, lambda: live, spec)
    return Published(live.get_weights(), live.version, spec.agent.make, spec)
