"""Collector: batched inference over ready devices, policy swaps, counters, exactly-once."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest

from devicerl.actions import Action
from devicerl.agents import ActionSample, Policy
from devicerl.agents.base import as_policy
from devicerl.envs import EnvSpec
from devicerl.pool import EnvPool, SupervisorConfig
from devicerl.records import DEFAULT_POLICY, Observation, Trajectory
from devicerl.runtime.acting.collector import Collector
from devicerl.runtime.acting.exploration import ExplorationSchedule
from devicerl.runtime.acting.planning import EpisodePlanner
from devicerl.tasks import Task, TaskSampler

STEPS = [Task("synthetic/steps", max_steps=10, env="synthetic")]


class Tapper(Policy):
    """Taps the centre; remembers batch sizes; sleeps a little to have an agent time."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.batches: list[int] = []

    def act(self, observations: Sequence[Observation], greedy: bool = False):
        self.batches.append(len(observations))
        time.sleep(0.002)
        return [ActionSample(Action.tap(0.5, 0.5), text="tap", log_prob=-1.0)] * len(observations)


def _pool(n: int = 3, worker: str = "subprocess", **kw) -> EnvPool:
    specs = [
        EnvSpec("synthetic/steps", {"render": False, "step_latency": 0.003, "seed": i, **kw})
        for i in range(n)
    ]
    return EnvPool(specs, tasks=TaskSampler(STEPS, seed=4), worker=worker)


def test_collect_batches_ready_devices_and_counts() -> None:
    policy = Tapper(version=3)
    with _pool(4) as pool:
        collector = Collector(pool, policy)
        trajectories = list(collector.collect(20))
        more = collector.run(5)
        stats = collector.stats
    assert len(trajectories) == 20 and len(more) == 5  # no truncation without faults
    ids = {t.episode_id for t in trajectories + more}
    assert len(ids) == 25
    assert max(policy.batches) > 1  # several ready devices answered in one call
    steps = [s for t in trajectories for s in t.steps]
    assert all(s.policy_version == 3 and s.text == "tap" and s.log_prob == -1.0 for s in steps)
    # each step carries its share of its batch's policy time (a timing-free check: the shares
    # of finished episodes' steps add up to at most what the collector measured in all)
    assert all(s.agent_time_s > 0 for s in steps)
    more_steps = [s for t in more for s in t.steps]
    assert sum(s.agent_time_s for s in steps + more_steps) <= stats.agent_time_s + 1e-9
    assert stats.episodes == 25 and stats.successes == sum(t.success for t in trajectories + more)
    assert stats.env_steps >= sum(len(t.steps) for t in trajectories + more)
    assert stats.steps_per_s > 0 and 0 < stats.agent_time_share < 1
    assert stats.as_dict()["rollout/success_rate"] == stats.success_rate


class Swappable:
    """A `PolicySource` whose policy the test replaces between batches (as a trainer publishes
    new weights); it records the episodes in use each time it is asked."""

    def __init__(self, policy) -> None:
        self.policies = {DEFAULT_POLICY: as_policy(policy)}
        self.asked: list[set[str]] = []

    def current(self, in_use: set[str]) -> dict[str, Policy]:
        self.asked.append(set(in_use))
        return self.policies


def test_policy_swaps_between_batches() -> None:
    old, new = Tapper(version=1), Tapper(version=2)
    source = Swappable(old)
    with _pool(2, worker="serial") as pool:
        collector = Collector(pool, source)
        first = collector.run(5)
        swapped_at = time.time()
        source.policies[DEFAULT_POLICY] = new  # the trainer publishes new weights
        second = collector.run(5)
        # a plain callable
        source.policies[DEFAULT_POLICY] = as_policy(lambda obs: [Action.tap(0.1, 0.1)] * len(obs))
        third = collector.run(4)
    assert {s.policy_version for t in first for s in t.steps} == {1}
    assert new.batches and all(t.plan is not None for t in first + second + third)
    assert source.asked and all(asked <= {DEFAULT_POLICY} for asked in source.asked)
    steps = [s for t in second for s in t.steps]
    assert {s.policy_version for s in steps if s.started_at > swapped_at} == {2}
    assert {s.policy_version for s in steps if s.started_at < swapped_at} <= {1}
    assert (0.1, 0.1) in {s.action.touch for t in third for s in t.steps}


def test_truncated_episodes_are_yielded_but_not_counted() -> None:
    config = SupervisorConfig(max_restarts=None, backoff_s=0.0, max_restarts_per_minute=10**6)
    specs = [
        EnvSpec("synthetic/steps", {"render": False, "faults": {"error": 0.2}, "seed": i})
        for i in range(2)
    ]
    with EnvPool(specs, tasks=STEPS, worker="serial", supervision=config) as pool:
        collector = Collector(pool, Tapper(version=0))
        trajectories = collector.run(10)
    complete = [t for t in trajectories if not t.is_truncated]
    cut = [t for t in trajectories if t.is_truncated]
    assert len(complete) == 10 and cut
    assert collector.stats.truncated == len(cut) and collector.stats.restarts >= len(cut)
    assert all("injected error" in t.truncation_cause for t in cut)


class HistoryReader(Policy):
    """Checks that each observation carries its episode's previous actions, in order."""

    uses_history = True

    def __init__(self) -> None:
        self.version = 0
        self.seen = 0

    def act(self, observations: Sequence[Observation], greedy: bool = False):
        out = []
        for obs in observations:
            prev = obs.previous_actions
            assert len(prev) == obs.step, (len(prev), obs.step)
            # every action is a tap at a distinct x that encodes its step index
            assert [round(a.touch[0] * 100) for a in prev] == list(range(obs.step))
            self.seen += 1
            out.append(ActionSample(Action.tap(obs.step / 100, 0.5)))
        return out


def test_agents_see_their_episodes_previous_actions() -> None:
    policy = HistoryReader()
    with _pool(3) as pool:
        trajectories = Collector(pool, policy).run(12)
    assert policy.seen >= 24 and len(trajectories) >= 12
    for t in trajectories:  # the stored observations stay as the device returned them
        assert all(s.observation.previous_actions == () for s in t.steps)


class LevelReader(Tapper):
    """Taps the centre and remembers the exploration level each observation was asked at (0
    when the collector passed none)."""

    def __init__(self) -> None:
        super().__init__(version=0)
        self.levels: list[float] = []
        self.calls_without: int = 0

    def act(
        self,
        observations: Sequence[Observation],
        greedy: bool = False,
        epsilon: Sequence[float] | None = None,
    ):
        if epsilon is None:
            self.calls_without += 1
            epsilon = [0.0] * len(observations)
        assert len(epsilon) == len(observations)
        self.levels += list(epsilon)
        return super().act(observations, greedy)


def _planned(tasks: list[Task], schedule: ExplorationSchedule) -> EpisodePlanner:
    return EpisodePlanner(TaskSampler(tasks, seed=4), exploration=schedule)


def _recorded(collector: Collector, planner: EpisodePlanner, n: int) -> list[Trajectory]:
    """``n`` complete episodes, each recorded by the planner as it comes out (as the judging
    stage does with the device's labels)."""
    out = []
    for t in collector.collect(n):
        if not t.is_truncated:
            planner.record(t)
        out.append(t)
    return out


def test_exploration_levels_follow_each_tasks_recent_success() -> None:

    tasks = [*STEPS, Task("synthetic/tap", max_steps=2, env="synthetic")]
    exploration = ExplorationSchedule(0.8, window=1000)
    policy = LevelReader()
    specs = [EnvSpec("synthetic/steps", {"render": False, "seed": i}) for i in range(3)]
    planner = _planned(tasks, exploration)
    with EnvPool(specs, tasks=planner) as pool:
        trajectories = _recorded(Collector(pool, policy), planner, 40)
    assert policy.levels[0] == 0.8  # nothing seen yet: the highest level
    assert all(0.0 <= v <= 0.8 for v in policy.levels)
    assert min(policy.levels) < 0.8  # the steps task succeeds half the time: explored less
    for task in ("synthetic/steps", "synthetic/tap"):  # every labelled episode was recorded
        ends = [t.success for t in trajectories if t.task == task]
        assert ends and exploration.success_rate(task) == pytest.approx(sum(ends) / len(ends))
    for t in trajectories:  # each episode stores the level it acted at, in its plan
        assert t.plan is not None and 0.0 <= t.epsilon <= 0.8
        assert t.epsilon == t.plan.epsilon and t.plan.greedy is None


def test_probes_free_a_task_from_exploration_once_the_policy_solves_it() -> None:

    trapped = ExplorationSchedule(0.6, window=3, rule="unsolved")
    trapped.record("a", False)
    for _ in range(10):  # explored episodes of a form fail: without probes it never leaves
        assert trapped.level("a") == 0.6
        trapped.record("a", False, 0.6)
    ex = ExplorationSchedule(0.6, window=3, rule="unsolved", probe=3)
    ex.record("a", False)
    assert [ex.level("a") for _ in range(6)] == [0.6, 0.6, 0.0, 0.6, 0.6, 0.0]  # every 3rd
    for _ in range(5):
        ex.record("a", False, 0.6)  # explored: not counted
    assert ex.success_rate("a") == 0.0 and ex.level("a") == 0.6
    ex.record("a", True, 0.0)  # a probe succeeds: the policy solves it
    assert ex.success_rate("a") == 0.5 and ex.level("a") == 0.0 and ex.level("a") == 0.0
    with pytest.raises(ValueError, match="probe"):
        ExplorationSchedule(0.6, probe=2)  # the linear rule has no explored state to probe

    tasks = [*STEPS, Task("synthetic/tap", max_steps=2, env="synthetic")]
    real = ExplorationSchedule(0.8, window=1000, rule="unsolved", threshold=0.99, probe=2)
    specs = [EnvSpec("synthetic/steps", {"render": False, "seed": i}) for i in range(3)]
    planner = _planned(tasks, real)
    policy = LevelReader()
    with EnvPool(specs, tasks=planner) as pool:
        trajectories = _recorded(Collector(pool, policy), planner, 30)
    levels = {t.epsilon for t in trajectories}
    assert levels == {0.0, 0.8}  # explored episodes and probes (and first episodes)
    assert set(policy.levels) == {0.0, 0.8}
    for task in ("synthetic/steps", "synthetic/tap"):  # judged by the policy's own episodes
        own = [t.success for t in trajectories if t.task == task and t.epsilon == 0]
        assert own and real.success_rate(task) == pytest.approx(sum(own) / len(own))


def test_exploration_level_is_max_times_recent_failure_rate() -> None:

    ex = ExplorationSchedule(0.5, window=4)
    assert ex.level("a") == 0.5 and ex.level(None) == 0.5 and ex.success_rate("a") is None
    for success in (True, True, False, True, True):  # the window keeps the last 4
        ex.record("a", success)
    assert ex.success_rate("a") == 0.75 and ex.level("a") == pytest.approx(0.125)
    assert ex.level("b") == 0.5  # other tasks are unaffected
    again = ExplorationSchedule(0.5, window=4)
    again.load_state_dict(ex.state_dict())
    assert again.level("a") == ex.level("a")
    with pytest.raises(ValueError, match="max_level"):
        ExplorationSchedule(1.0)
    with pytest.raises(ValueError, match="window"):
        ExplorationSchedule(0.5, window=0)
    with pytest.raises(ValueError, match="rule must be one of linear, unsolved"):
        ExplorationSchedule(0.5, rule="cosine")


def test_the_unsolved_rule_explores_only_tasks_with_no_recent_success() -> None:

    ex = ExplorationSchedule(0.6, window=3, rule="unsolved")
    assert ex.level("a") == 0.0 and ex.level(None) == 0.0  # unseen: left to the policy
    ex.record("a", False)
    assert ex.level("a") == 0.6  # seen, never solved: explored at the top level
    ex.record("a", True)
    assert ex.level("a") == 0.0  # one recent success: the policy's own sampling
    for _ in range(3):  # the success leaves the window
        ex.record("a", False)
    assert ex.level("a") == 0.6 and ex.level("b") == 0.0
    low = ExplorationSchedule(0.6, window=5, rule="unsolved", threshold=0.2)
    for success in (True, False, False, False, False):
        low.record("a", success)
    assert low.level("a") == 0.6  # 1 of 5: still at or below the threshold
    low.record("a", True)  # the first success leaves the window: 1 of 5 again
    assert low.level("a") == 0.6
    low.record("a", True)
    assert low.level("a") == 0.0  # 2 of 5
    with pytest.raises(ValueError, match="threshold"):
        ExplorationSchedule(0.6, rule="unsolved", threshold=1.0)
