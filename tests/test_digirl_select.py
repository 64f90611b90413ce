"""DigiRL's selection with fixed critics, checked against hand-computed advantages (next-value
alignment, horizon, kept steps, curriculum), its ablation switches, critic warm-up and the
critics' diagnostics on held-out trajectories."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pytest
import torch
from _runs import collect

from devicerl.actions import Action
from devicerl.agents.small import SmallAgent
from devicerl.algos.base import ActorConfig
from devicerl.algos.digirl import CriticConfig, DigiRL, DigiRLConfig, roc_auc
from devicerl.algos.filtered_bc import FilteredBC, FilteredBCConfig
from devicerl.records import EndReason, Observation, Step, Trajectory


class FixedCritic:
    """A critic whose values are given: V read from the observation."""

    def __init__(self, value: Callable[[Observation], float]) -> None:
        self.value = value

    def values(self, observations: Sequence[Observation]) -> torch.Tensor:
        return torch.tensor([self.value(o) for o in observations], dtype=torch.float32)


def trajectory(name: str, values: list[float], success: bool, max_steps: int) -> Trajectory:
    """Steps whose observations carry the step critic's value; the last step solves it when
    `success`."""
    t = Trajectory(task=f"t/{name}", instruction=name, extras={"max_steps": max_steps})
    for i, v in enumerate(values):
        obs = Observation(instruction=name, screen_size=(1, 1), step=i, extras={"v": v})
        last = i == len(values) - 1
        reward = 1.0 if success and last else 0.0
        t.steps.append(Step(obs, Action.tap(0.5, 0.5), reward=reward, terminated=last))
    return t.end(EndReason.SUCCESS if success else EndReason.FAILURE, success=success)


V_INSTR = {"a": 0.3, "b": 0.1, "c": 0.8, "d": 0.6, "e": 0.5, "f": 0.5}


def data() -> list[Trajectory]:
    return [
        # lam = 0.5, H = 3: A = 0.25 + 0.75 (0.6 - 0.2), 0.5 + 0.5 (0.9 - 0.6), 1 = .55 .65 1
        trajectory("a", [0.2, 0.6, 0.9], success=True, max_steps=10),
        # a failure: A = V(s') - V(s) = -0.3, 0.4, -0.6 (value after the last step: 0)
        trajectory("b", [0.5, 0.2, 0.6], success=False, max_steps=10),
        # H = 2: A = 0.5 + 0.5 (0.7 - 0.9) = 0.4, then 1; horizon 2: threshold 1/2
        trajectory("c", [0.9, 0.7], success=True, max_steps=2),
        # the same values with horizon 10 (threshold 0.1): both steps kept
        trajectory("d", [0.9, 0.7], success=True, max_steps=10),
    ]


def learner(**options) -> DigiRL:
    rl = DigiRL(SmallAgent(seed=0), DigiRLConfig(**options), seed=0)
    rl.instr_critic = FixedCritic(lambda o: V_INSTR[o.instruction])  # type: ignore[assignment]
    rl.step_critic = FixedCritic(lambda o: o.extras["v"])  # type: ignore[assignment]
    return rl


def kept(samples) -> set[tuple[str, int]]:
    return {(s.trajectory.instruction, s.index) for s in samples}


def test_step_advantages_by_hand() -> None:
    rl = learner()
    a, b, c, _ = data()
    for t, expected in ((a, [0.55, 0.65, 1.0]), (b, [-0.3, 0.4, -0.6]), (c, [0.4, 1.0])):
        values = torch.tensor([s.observation.extras["v"] for s in t.steps])
        assert rl.step_advantages(t, values).tolist() == pytest.approx(expected)


def test_select_curriculum_then_step_filter() -> None:
    # A_instr = r_H - V_instr: a .7, b -.1, c .2, d .4; top-p 0.5 of 4 keeps a and d
    samples, stats = learner(top_p=0.5).select(data())
    assert kept(samples) == {("a", 0), ("a", 1), ("a", 2), ("d", 0), ("d", 1)}
    assert stats["train/curriculum_kept_frac"] == 0.5
    assert stats["train/step_filter_kept_frac"] == 1.0
    # every trajectory: b keeps only its step with A = 0.4; c loses its first step (0.4 < 1/2)
    samples, stats = learner(top_p=1.0).select(data())
    assert kept(samples) == {
        ("a", 0), ("a", 1), ("a", 2), ("b", 1), ("c", 1), ("d", 0), ("d", 1)
    }  # fmt: skip
    assert stats["train/step_filter_kept_frac"] == pytest.approx(7 / 10)
    assert stats["train/kept_steps_failed_frac"] == pytest.approx(1 / 7)  # b's step
    # successes a, c, d have 7 steps, c's first is dropped; values spread .7 .4 .2 .2 (a b c d)
    assert stats["train/success_steps_dropped_frac"] == pytest.approx(1 / 7)
    assert stats["train/step_value_spread"] == pytest.approx((0.7 + 0.4 + 0.2 + 0.2) / 4)
    assert stats["train/kept_steps"] == 7 and stats["train/kept_trajectories"] == 4


def test_rehearsal_adds_each_tasks_best_successes_to_the_curriculum() -> None:
    # top-p 0.25 of 4 keeps a alone (A_instr .7); rehearse=1 adds the best success of every
    # other task: c (.2) and d (.4), never the failure b; c's first step fails the step filter
    samples, stats = learner(top_p=0.25).select(data())
    assert kept(samples) == {("a", 0), ("a", 1), ("a", 2)}
    samples, stats = learner(top_p=0.25, rehearse=1).select(data())
    assert kept(samples) == {("a", 0), ("a", 1), ("a", 2), ("c", 1), ("d", 0), ("d", 1)}
    assert stats["train/curriculum_kept_frac"] == 0.75
    # two successes of task t/c: rehearse=1 keeps the one with the higher A_instr (.4 > .2)
    twin = trajectory("d", [0.9, 0.7], success=True, max_steps=10)
    twin.task = "t/c"
    samples, stats = learner(top_p=0.2, rehearse=1).select([*data(), twin])
    assert stats["train/kept_trajectories"] == 3  # a, d and the twin
    assert ("c", 1) not in kept(samples)
    assert sum(1 for s in samples if s.trajectory is twin) == 2
    _, stats = learner(top_p=0.2).select([*data(), twin])
    assert stats["train/kept_trajectories"] == 1


def test_rehearse_pick_random_draws_a_fresh_success_each_iteration() -> None:
    # six successes of task t/c with one instruction (equal A_instr .2) and a failure of it;
    # the curriculum keeps a alone (A .7): the highest-A_instr pick takes the oldest success of
    # c every time, the random pick varies its draw among the successes, never the failure
    def runs() -> list[Trajectory]:
        out = [trajectory("c", [0.9, 0.7], success=True, max_steps=10) for _ in range(6)]
        failure = trajectory("c", [0.9, 0.7], success=False, max_steps=10)
        return [*out, failure, trajectory("a", [0.2, 0.6, 0.9], success=True, max_steps=10)]

    def picks(rl: DigiRL, pool: list[Trajectory]) -> list[int]:
        drawn = []
        for _ in range(30):
            samples, stats = rl.select(pool)
            assert stats["train/kept_trajectories"] == 2  # a and one success of c
            drawn.append(
                next(pool.index(s.trajectory) for s in samples if s.trajectory.task == "t/c")
            )
        return drawn

    pool = runs()
    assert set(picks(learner(top_p=0.1, rehearse=1), pool)) == {0}
    drawn = picks(learner(top_p=0.1, rehearse=1, rehearse_pick="random"), pool)
    assert len(set(drawn)) >= 4 and 6 not in drawn


def test_rehearse_share_keeps_a_share_of_each_tasks_successes() -> None:
    # eight successes of task t/c and one of t/a (the curriculum's top); share .5 adds 4 of c's
    # successes (ceil(.5 * 8)) and a's one success; rehearse=1 alone adds one of c's
    def runs() -> list[Trajectory]:
        out = [trajectory("c", [0.9, 0.7], success=True, max_steps=10) for _ in range(8)]
        return [*out, trajectory("a", [0.2, 0.6, 0.9], success=True, max_steps=10)]

    def rehearsed_of_c(rl: DigiRL) -> int:
        samples, _ = rl.select(runs())
        return len({id(s.trajectory) for s in samples if s.trajectory.task == "t/c"})

    assert rehearsed_of_c(learner(top_p=0.1, rehearse=1, rehearse_whole=True)) == 1
    assert rehearsed_of_c(learner(top_p=0.1, rehearse_share=0.5, rehearse_whole=True)) == 4
    assert (
        rehearsed_of_c(learner(top_p=0.1, rehearse=6, rehearse_share=0.5, rehearse_whole=True)) == 6
    )
    assert rehearsed_of_c(learner(top_p=0.1, rehearse_share=0.3, rehearse_whole=True)) == 3


def test_rehearse_weight_lowers_only_the_successes_rehearsal_alone_adds() -> None:
    # top-p 0.25 keeps a; rehearse=1 adds c and d, whose steps carry the rehearse weight
    samples, _ = learner(top_p=0.25, rehearse=1, rehearse_weight=0.2).select(data())
    weights = {(s.trajectory.instruction, s.index): s.weight for s in samples}
    assert weights == {
        ("a", 0): 1,
        ("a", 1): 1,
        ("a", 2): 1,
        ("c", 1): 0.2,
        ("d", 0): 0.2,
        ("d", 1): 0.2,
    }
    # a success the curriculum keeps itself is never down-weighted
    samples, _ = learner(top_p=1.0, rehearse=1, rehearse_weight=0.2).select(data())
    assert {s.weight for s in samples} == {1.0}


def test_rehearse_whole_imitates_every_step_of_the_rehearsed_successes() -> None:
    # rehearse_whole: c's first step (A .4 < 1/2) is kept as a rehearsed success; the failure b,
    # which the curriculum alone keeps, still goes through the step filter (its step 1 alone)
    samples, _ = learner(top_p=1.0, rehearse=1, rehearse_whole=True).select(data())
    assert kept(samples) == {
        ("a", 0), ("a", 1), ("a", 2), ("b", 1), ("c", 0), ("c", 1), ("d", 0), ("d", 1)
    }  # fmt: skip
    samples, _ = learner(top_p=1.0, rehearse=1).select(data())
    assert ("c", 0) not in kept(samples)
    # a success of c past its task's quota is filtered: only the rehearsed one passes whole
    twin = trajectory("c", [0.9, 0.7], success=True, max_steps=2)
    samples, _ = learner(top_p=1.0, rehearse=1, rehearse_whole=True).select([*data(), twin])
    firsts = [s for s in samples if s.trajectory.instruction == "c" and s.index == 0]
    assert len(firsts) == 1


def test_the_curriculum_ranks_the_whole_replay() -> None:
    # 2000 failures of task b and one success of a (the top A_instr): as in the reference and
    # Filtered BC, every trajectory of the replay is ranked, so the rare success is imitated
    # every iteration; ranking a random 200 of them finds it about 1 time in 10
    replay = [*(trajectory("b", [0.5, 0.2, 0.6], False, 10) for _ in range(2000)), data()[0]]
    rl = learner()
    assert all(("a", 2) in kept(rl.select(replay)[0]) for _ in range(5))
    rl = learner(advantage_sample=200)
    assert sum(("a", 2) in kept(rl.select(replay)[0]) for _ in range(20)) < 10


def test_ablation_switches() -> None:
    every = {(n, i) for n, k in (("a", 3), ("b", 3), ("c", 2), ("d", 2)) for i in range(k)}
    samples, stats = learner(top_p=1.0, step_filter=False).select(data())
    assert kept(samples) == every and stats["train/step_filter_kept_frac"] == 1.0
    assert stats["train/success_steps_dropped_frac"] == 0.0
    samples, _ = learner(top_p=0.5, curriculum=False).select(data())  # all go to the filter
    assert kept(samples) == kept(learner(top_p=1.0).select(data())[0])
    # no critics: top-p by return (ties kept, failures never), every step (Filtered BC)
    samples, stats = learner(top_p=0.5, critics=False).select(data())
    assert kept(samples) == {k for k in every if k[0] != "b"}
    assert stats["train/curriculum_kept_frac"] == 0.75 and "train/v_instr_mean" not in stats
    bc = FilteredBC(SmallAgent(seed=0), FilteredBCConfig(top_p=0.5), seed=0)
    assert kept(bc.select(data())[0]) == kept(samples)


def test_demonstration_steps_can_skip_the_step_filter() -> None:
    # a flat critic: A = lam^(H-h) = 1/32 1/16 1/8 1/4 1/2 1, threshold 1/10: the first two go
    demo = trajectory("e", [0.3] * 6, success=True, max_steps=10)
    own = trajectory("f", [0.3] * 6, success=True, max_steps=10)
    demo.extras["demonstration"] = "scripted"
    samples, stats = learner(top_p=1.0).select([demo, own])
    assert kept(samples) == {(n, i) for n in "ef" for i in range(2, 6)}
    assert stats["train/success_steps_dropped_frac"] == pytest.approx(4 / 12)
    samples, stats = learner(top_p=1.0, keep_demonstration_steps=True).select([demo, own])
    assert kept(samples) == {("e", i) for i in range(6)} | {("f", i) for i in range(2, 6)}
    assert stats["train/success_steps_dropped_frac"] == pytest.approx(2 / 12)


def test_roc_auc() -> None:
    assert roc_auc(torch.tensor([0.9, 0.8, 0.1, 0.3]), [True, True, False, False]) == 1.0
    assert roc_auc(torch.tensor([0.1, 0.5, 0.5]), [True, True, False]) == 0.25
    assert math.isnan(roc_auc(torch.tensor([0.2, 0.4]), [True, True]))


@pytest.fixture(scope="module")
def episodes() -> list[Trajectory]:
    return collect(24, screen=(48, 80))


def test_critic_warmup_then_actor_and_diagnostics(episodes) -> None:
    small = dict(batch_size=8, instruction_updates=1, step_updates=1)
    config = DigiRLConfig(
        critic_warmup=2,
        heldout_every=3,
        top_p=1.0,
        actor=ActorConfig(updates=2, batch_size=8),
        critic=CriticConfig(**small),  # type: ignore[arg-type]
    )
    rl = DigiRL(SmallAgent(seed=0), config, seed=0)
    train, heldout = rl.split_heldout(episodes)
    assert heldout and train and len(train) + len(heldout) == len(episodes)
    assert rl.split_heldout(list(reversed(episodes)))[1] == list(reversed(heldout))  # by id
    before = [p.detach().clone() for p in rl.actor.parameters()]
    critic_before = [p.detach().clone() for p in rl.step_critic.parameters()]
    steps = [s for t in heldout for s in t.steps]
    y = torch.tensor([1.0 if t.success else 0.0 for t in heldout for _ in t.steps])
    for _ in range(2):
        m = rl.update(episodes)
        assert m["train/critic_warmup"] == 1.0 and "train/actor_loss" not in m
        v = rl.step_critic.values([s.observation for s in steps])  # the held-out slice
        assert m["train/critic_brier"] == pytest.approx(float(((v - y) ** 2).mean()), abs=1e-5)
        accuracy = float(((v > 0.5).float() == y).float().mean())
        assert m["train/critic_accuracy"] == pytest.approx(accuracy, abs=1e-6)
        assert m["train/critic_heldout"] == len(heldout)
    assert all(torch.equal(a, b) for a, b in zip(before, rl.actor.parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(critic_before, rl.step_critic.parameters()))
    m = rl.update(episodes)  # warm-up over: the actor learns
    assert "train/critic_warmup" not in m and "train/actor_loss" in m
    assert not all(torch.equal(a, b) for a, b in zip(before, rl.actor.parameters()))
    assert rl.state_dict()["iterations"] == 3


def test_two_separate_critic_heads() -> None:
    critic = DigiRL(SmallAgent(seed=0), DigiRLConfig(), seed=0).step_critic
    first, second = critic.value_heads
    assert first[0].weight.data_ptr() != second[0].weight.data_ptr()  # own hidden layers
    assert not torch.equal(first[0].weight, second[0].weight)  # own initialisation
