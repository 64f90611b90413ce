"""Evaluation keeps each device on one task (`TaskAffinity`): the same (task, seed) pairs and,
with a fixed policy, the same outcomes as handing the instances out in order, with each
device opening fewer task pages."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import pairwise

from devicerl.actions import Action
from devicerl.agents.base import ActionSample, Policy
from devicerl.envs import EnvSpec, register
from devicerl.envs.synthetic import SyntheticEnv, SyntheticOptions
from devicerl.pool import EnvPool
from devicerl.records import Observation, Task, TaskInstance, Trajectory
from devicerl.runtime.loop.evaluation import eval_sampler, evaluate_policy
from devicerl.tasks import TaskSampler, resolve
from devicerl.tasks.placement import TaskAffinity


def _instances(tasks: int, seeds: int) -> list[TaskInstance]:
    return [TaskInstance(Task(f"t{i}"), 100 * i + s) for i in range(tasks) for s in range(seeds)]


def _pairs(instances: Sequence[TaskInstance | None]) -> Counter:
    return Counter((i.task.name, i.seed) for i in instances if i is not None)


def _ask_in_turn(next_for, devices: int = 3) -> dict[int, list[TaskInstance]]:
    """Every device asks for its next instance in turn until none is left."""
    got: dict[int, list[TaskInstance]] = {d: [] for d in range(devices)}
    asking = set(got)
    while asking:
        for device in sorted(asking):
            inst = next_for(device)
            if inst is None:
                asking.discard(device)
            else:
                got[device].append(inst)
    return got


def _opened(got: dict[int, list[TaskInstance]]) -> int:
    """Task pages the devices opened: each device opens a task's page once."""
    return sum(len({i.task.name for i in played}) for played in got.values())


def test_every_instance_once_and_each_device_stays_on_its_task() -> None:
    listed = _instances(8, 5)
    placed = TaskAffinity(listed)
    got = _ask_in_turn(placed.next_for)
    assert len(placed) == 0 and placed.next_for(0) is None
    assert _pairs([i for played in got.values() for i in played]) == _pairs(listed)
    for played in got.values():  # a device's tasks come in runs: it never goes back to one
        runs = [i.task.name for k, i in enumerate(played) if k == 0 or played[k - 1].task != i.task]
        assert len(runs) == len(set(runs))
    in_order = TaskAffinity(listed)
    assert [in_order.next() for _ in listed] == listed  # no device named: the list's order
    in_order = TaskAffinity(listed)
    before = _ask_in_turn(lambda device: in_order.next())  # the devices take the list's order
    assert _opened(before) == 24  # every device opened every task's page
    assert _opened(got) <= 12


def test_a_device_that_stops_asking_strands_nothing() -> None:
    placed = TaskAffinity(_instances(2, 4))
    first = placed.next_for(0)  # device 0 takes one instance of t0, then is gone (retired)
    rest = []
    while (inst := placed.next_for(1)) is not None:
        rest.append(inst)
    assert first is not None and first.task.name == "t0"
    assert _pairs([first, *rest]) == _pairs(_instances(2, 4))
    assert [i.task.name for i in rest] == ["t1"] * 4 + ["t0"] * 3  # joined t0 once t1 ran out


class FirstBox(Policy):
    """A fixed policy: taps the first element it sees (types a fixed word into a focused one),
    so an episode's outcome depends only on its (task, seed)."""

    def act(
        self,
        observations: Sequence[Observation],
        greedy: bool = False,
        epsilon: Sequence[float] | None = None,
    ) -> list[ActionSample]:
        out = []
        for obs in observations:
            box = obs.elements[0] if obs.elements else None
            if box is None:
                action = Action.tap(0.5, 0.5)
            elif box.focused:
                action = Action.type_text("apple")
            else:
                action = Action.tap(*obs.to_normalised(*box.center))
            out.append(ActionSample(action, log_prob=0.0))
        return out


def _evaluate(sampler) -> list[Trajectory]:
    specs = [EnvSpec("synthetic", {"seed": i}) for i in range(3)]
    played: list[Trajectory] = []
    evaluate_policy(
        lambda s: EnvPool(specs, tasks=s, worker="subprocess"),
        FirstBox(),
        sampler,
        on_episode=played.append,
    )
    return played


def _outcomes(played: list[Trajectory]) -> dict[tuple[str, int], tuple]:
    return {
        (t.task, t.seed): (t.success, t.end_reason, [s.action for s in t.steps]) for t in played
    }


def test_evaluation_plays_the_same_episodes_with_the_same_outcomes() -> None:
    tasks = resolve("synthetic/*")
    in_order = TaskSampler(
        [t for t in tasks for _ in range(6)], mode="sequential", seed=7, cycle=False,
        seeds="validation",
    )  # fmt: skip
    before = _evaluate(in_order)  # how evaluation handed its instances out before
    after = _evaluate(eval_sampler(tasks, len(tasks), 6, 7))
    assert len(before) == len(after) == 6 * len(tasks)
    assert _outcomes(after) == _outcomes(before)
    assert 0 < sum(t.success for t in after) < len(after)  # outcomes that differ by instance
    per_device = Counter(t.env_id for t in after)
    tasks_of = {d: {t.task for t in after if t.env_id == d} for d in per_device}
    assert sum(len(v) for v in tasks_of.values()) <= len(tasks) + 2


class Leaving(SyntheticEnv):
    """A synthetic device that logs its resets and the tasks it was told it left."""

    log: list[tuple[int, str, str]] = []  # (device seed, "reset" or "leave", task)

    def leave(self, task: str) -> None:
        self.log.append((self.options.seed, "leave", task))

    def _reset(self, task, seed):
        self.log.append((self.options.seed, "reset", task.name))
        return super()._reset(task, seed)


def test_a_device_is_told_which_tasks_it_left_for_good() -> None:
    """Under `TaskAffinity` a device that moves on to another task is told (`leave`) the one
    it left, before its first episode of the next one, and never plays the one it left again;
    a sampler that may come back to a task tells nothing."""
    register("leaving", Leaving, options=SyntheticOptions, overwrite=True)
    tasks = resolve("synthetic/*")[:4]
    specs = [EnvSpec("leaving", {"seed": i}) for i in range(2)]
    samplers = [(eval_sampler(tasks, 4, 5, 3), True), (TaskSampler(tasks, seed=3), False)]
    for sampler, told in samplers:
        Leaving.log.clear()
        with EnvPool(specs, tasks=sampler, worker="serial") as pool:
            ids = [r.env_id for r in pool.recv(min_ready=2, timeout=30) if r.observation]
            for _ in range(60):
                pool.send([Action.tap(0.5, 0.5)] * len(ids), ids)
                ids = [r.env_id for r in pool.recv(min_ready=1, timeout=30) if r.observation]
                if not ids:
                    break
        left = [(d, t) for d, what, t in Leaving.log if what == "leave"]
        assert bool(left) == told
        for device in range(2):
            seen = [(what, t) for d, what, t in Leaving.log if d == device]
            resets = [t for what, t in seen if what == "reset"]
            for k, (what, t) in enumerate(seen):
                if what == "leave":  # right before the first reset of another task
                    assert seen[k + 1][0] == "reset" and seen[k + 1][1] != t
                    assert t == [r for w, r in seen[:k] if w == "reset"][-1]
                    assert t not in [r for w, r in seen[k + 1 :] if w == "reset"]
            if told:
                switches = sum(a != b for a, b in pairwise(resets))
                assert switches == sum(d == device for d, _ in left)
