"""The learners' data selection as steps (`devicerl.algos.selection`) with fixed critics,
checked against hand-computed advantages: Filtered BC's top-p by return, DigiRL's curriculum
and step filter (next-value alignment, horizon, kept steps), rehearsal, the steps that stand in
when one is left out, no-op skipping, the validation of the configured lists, critic warm-up,
the critics' diagnostics on held-out trajectories and their two separate heads."""

from __future__ import annotations

import math

import pytest
import torch
from _runs import collect
from selection_helpers import learner, select, trajectory

from devicerl.agents.small import SmallAgent
from devicerl.algos.base import usable
from devicerl.algos.config import (
    ActorConfig,
    CriticConfig,
    DigiRLConfig,
    FilteredBCConfig,
    RehearsalConfig,
)
from devicerl.algos.critic_fit import HELDOUT_EVERY, roc_auc, split_heldout
from devicerl.algos.digirl import DigiRL
from devicerl.algos.filtered_bc import FilteredBC
from devicerl.algos.selection import (
    Curriculum,
    EveryStep,
    EveryTrajectory,
    Rehearsal,
    SkipNoops,
    StepFilter,
    TopPByReturn,
    horizon,
)
from devicerl.config import load_config
from devicerl.errors import ConfigError
from devicerl.records import Trajectory, UIElement
from devicerl.runtime.setup.config import TrainConfig

CURRICULUM_REHEARSAL = ("curriculum", "rehearsal", "step_filter")


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


#: Every step of `data()`.
EVERY = {(n, i) for n, k in (("a", 3), ("b", 3), ("c", 2), ("d", 2)) for i in range(k)}


def kept(samples) -> set[tuple[str, int]]:
    return {(s.trajectory.instruction, s.index) for s in samples}


def rehearsal(**options) -> RehearsalConfig:
    return RehearsalConfig(**options)


def test_the_configured_lists_build_the_steps_in_order() -> None:
    names = {
        ("curriculum", "step_filter"): [Curriculum, StepFilter],
        ("curriculum", "rehearsal", "step_filter", "skip_noops"): [
            Curriculum, Rehearsal, StepFilter, SkipNoops
        ],
        ("curriculum",): [Curriculum, EveryStep],
        ("curriculum", "skip_noops"): [Curriculum, EveryStep, SkipNoops],
        ("step_filter",): [EveryTrajectory, StepFilter],
        ("rehearsal", "step_filter"): [EveryTrajectory, Rehearsal, StepFilter],
    }  # fmt: skip
    for selection, steps in names.items():
        options = {} if "curriculum" in selection else {"rehearsal": rehearsal(pick="random")}
        assert [type(s) for s in learner(selection, **options).selection] == steps, selection
    agent = SmallAgent(seed=0)
    bc = FilteredBC(agent, FilteredBCConfig(), ActorConfig(), seed=0)
    assert [type(s) for s in bc.selection] == [TopPByReturn, EveryStep]
    config = FilteredBCConfig(selection=["top_p_by_return", "skip_noops"])
    bc = FilteredBC(agent, config, ActorConfig(), seed=0)
    assert [type(s) for s in bc.selection] == [TopPByReturn, EveryStep, SkipNoops]


def test_step_advantages_by_hand() -> None:
    rl = learner()
    a, b, c, d = data()
    step_filter = StepFilter(lam=0.5, values=rl.critics)
    for t, expected in ((a, [0.55, 0.65, 1.0]), (b, [-0.3, 0.4, -0.6]), (c, [0.4, 1.0])):
        values = torch.tensor([s.observation.extras["v"] for s in t.steps])
        assert step_filter.advantages(t, values).tolist() == pytest.approx(expected)
    # the keep threshold 1/H uses the task's step budget, recorded with the trajectory
    assert (horizon(a), horizon(c), horizon(d)) == (10, 2, 10)
    assert horizon(Trajectory("t", "x", steps=a.steps)) == 10  # none recorded: the default


def test_curriculum_then_step_filter() -> None:
    # A_instr = r_H - V_instr: a .7, b -.1, c .2, d .4; top-p 0.5 of 4 keeps a and d
    sel = select(learner(top_p=0.5), data())
    assert kept(sel.samples) == {("a", 0), ("a", 1), ("a", 2), ("d", 0), ("d", 1)}
    assert all(s.advantage == 1.0 for s in sel.samples)
    assert sel.instr_advantages.tolist() == pytest.approx([0.7, -0.1, 0.2, 0.4])
    assert sel.stats["train/curriculum_kept_frac"] == 0.5
    assert sel.stats["train/step_filter_kept_frac"] == 1.0
    assert sel.stats["train/v_instr_mean"] == pytest.approx((0.3 + 0.1 + 0.8 + 0.6) / 4)
    assert sel.stats["train/a_instr_mean"] == pytest.approx((0.7 - 0.1 + 0.2 + 0.4) / 4)
    # every trajectory: b keeps only its step with A = 0.4; c loses its first step (0.4 < 1/2)
    sel = select(learner(top_p=1.0), data())
    assert kept(sel.samples) == {
        ("a", 0), ("a", 1), ("a", 2), ("b", 1), ("c", 1), ("d", 0), ("d", 1)
    }  # fmt: skip
    stats = sel.stats
    assert stats["train/step_filter_kept_frac"] == pytest.approx(7 / 10)
    assert stats["train/kept_steps_failed_frac"] == pytest.approx(1 / 7)  # b's step
    # successes a, c, d have 7 steps, c's first is dropped; values spread .7 .4 .2 .2 (a b c d)
    assert stats["train/success_steps_dropped_frac"] == pytest.approx(1 / 7)
    assert stats["train/step_value_spread"] == pytest.approx((0.7 + 0.4 + 0.2 + 0.2) / 4)
    a_step = [0.55, 0.65, 1.0, -0.3, 0.4, -0.6, 0.4, 1.0, 0.4, 1.0]
    assert stats["train/a_step_mean"] == pytest.approx(sum(a_step) / len(a_step))
    assert stats["train/kept_steps"] == 7 and stats["train/kept_trajectories"] == 4


def test_top_p_by_return_is_filtered_bc() -> None:
    # returns a 1, b 0, c 1, d 1: top-p .5 of 4 is 2, ties at the cut kept (3), never b
    agent = SmallAgent(seed=0)
    bc = FilteredBC(agent, FilteredBCConfig(top_p=0.5), ActorConfig(), seed=0)
    sel = select(bc, data())
    assert kept(sel.samples) == {k for k in EVERY if k[0] != "b"}
    assert sel.stats["train/curriculum_kept_frac"] == 0.75
    assert "train/v_instr_mean" not in sel.stats and "train/a_step_mean" not in sel.stats
    # fewer successes than top-p: the successes only; none: nothing, and no actor update
    failures = [trajectory(n, [0.5, 0.5], success=False, max_steps=10) for n in "ab"]
    sel = select(FilteredBC(agent, FilteredBCConfig(top_p=1.0), ActorConfig(), seed=0), data())
    assert kept(sel.samples) == {k for k in EVERY if k[0] != "b"}
    bc = FilteredBC(agent, FilteredBCConfig(top_p=1.0), ActorConfig(), seed=0)
    assert select(bc, failures).samples == []
    before = [p.detach().clone() for p in agent.parameters()]
    metrics = bc.update(failures)
    assert metrics["train/actor_samples"] == 0 and math.isnan(metrics["train/actor_loss"])
    assert all(torch.equal(a, b) for a, b in zip(before, agent.parameters()))


def test_rehearsal_adds_each_tasks_best_successes_to_the_curriculum() -> None:
    # top-p 0.25 of 4 keeps a alone (A_instr .7); a rehearsal of 1 per task adds the best
    # success of every other task: c (.2) and d (.4), never the failure b; c's first step
    # fails the step filter
    sel = select(learner(top_p=0.25), data())
    assert kept(sel.samples) == {("a", 0), ("a", 1), ("a", 2)}
    one = rehearsal(per_task=1)
    sel = select(learner(CURRICULUM_REHEARSAL, top_p=0.25, rehearsal=one), data())
    assert kept(sel.samples) == {("a", 0), ("a", 1), ("a", 2), ("c", 1), ("d", 0), ("d", 1)}
    assert sel.stats["train/curriculum_kept_frac"] == 0.75
    # two successes of task t/c: a rehearsal of 1 keeps the one with the higher A_instr (.4 > .2)
    twin = trajectory("d", [0.9, 0.7], success=True, max_steps=10)
    twin.task = "t/c"
    sel = select(learner(CURRICULUM_REHEARSAL, top_p=0.2, rehearsal=one), [*data(), twin])
    assert sel.stats["train/kept_trajectories"] == 3  # a, d and the twin
    assert ("c", 1) not in kept(sel.samples)
    assert sum(1 for s in sel.samples if s.trajectory is twin) == 2
    assert select(learner(top_p=0.2), [*data(), twin]).stats["train/kept_trajectories"] == 1
    # the chosen trajectories keep the data's order
    assert [c.trajectory.instruction for c in sel.chosen] == ["a", "d", "d"]


def test_rehearsal_pick_random_draws_a_fresh_success_each_iteration() -> None:
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
            sel = select(rl, pool)
            assert sel.stats["train/kept_trajectories"] == 2  # a and one success of c
            drawn.append(
                next(pool.index(s.trajectory) for s in sel.samples if s.trajectory.task == "t/c")
            )
        return drawn

    pool = runs()
    one = rehearsal(per_task=1)
    assert set(picks(learner(CURRICULUM_REHEARSAL, top_p=0.1, rehearsal=one), pool)) == {0}
    drawn = picks(
        learner(CURRICULUM_REHEARSAL, top_p=0.1, rehearsal=rehearsal(per_task=1, pick="random")),
        pool,
    )
    assert len(set(drawn)) >= 4 and 6 not in drawn
    # the random pick needs no curriculum: every trajectory is chosen, the draw picks which
    # successes pass whole
    rl = learner(("rehearsal", "step_filter"), rehearsal=rehearsal(per_task=1, pick="random",
                                                                   whole=True))  # fmt: skip
    sel = select(rl, pool)
    assert len(sel.chosen) == len(pool)
    assert sum(c.whole for c in sel.chosen) == 2 and not any(
        c.whole and not c.trajectory.success for c in sel.chosen
    )


def test_rehearsal_share_keeps_a_share_of_each_tasks_successes() -> None:
    # eight successes of task t/c and one of t/a (the curriculum's top); a share of .5 adds 4 of
    # c's successes (ceil(.5 * 8)), and a's one success; per_task=1 alone adds one of c's
    def runs() -> list[Trajectory]:
        out = [trajectory("c", [0.9, 0.7], success=True, max_steps=10) for _ in range(8)]
        return [*out, trajectory("a", [0.2, 0.6, 0.9], success=True, max_steps=10)]

    def rehearsed_of_c(**options) -> int:
        rl = learner(CURRICULUM_REHEARSAL, top_p=0.1, rehearsal=rehearsal(whole=True, **options))
        sel = select(rl, runs())
        return len({id(s.trajectory) for s in sel.samples if s.trajectory.task == "t/c"})

    assert rehearsed_of_c(per_task=1) == 1
    assert rehearsed_of_c(per_task=1, share=0.5) == 4
    assert rehearsed_of_c(per_task=6, share=0.5) == 6
    assert rehearsed_of_c(per_task=1, share=0.3) == 3


def test_rehearsal_whole_imitates_every_step_of_the_rehearsed_successes() -> None:
    # whole: c's first step (A .4 < 1/2) is kept as a rehearsed success; the failure b, which
    # the curriculum alone keeps, still goes through the step filter (its step 1 alone)
    whole = rehearsal(per_task=1, whole=True)
    sel = select(learner(CURRICULUM_REHEARSAL, top_p=1.0, rehearsal=whole), data())
    assert kept(sel.samples) == {
        ("a", 0), ("a", 1), ("a", 2), ("b", 1), ("c", 0), ("c", 1), ("d", 0), ("d", 1)
    }  # fmt: skip
    assert [c.whole for c in sel.chosen] == [True, False, True, True]
    one = rehearsal(per_task=1)
    sel = select(learner(CURRICULUM_REHEARSAL, top_p=1.0, rehearsal=one), data())
    assert ("c", 0) not in kept(sel.samples) and not any(c.whole for c in sel.chosen)
    # a success of c past its task's quota is filtered: only the rehearsed one passes whole
    twin = trajectory("c", [0.9, 0.7], success=True, max_steps=2)
    sel = select(learner(CURRICULUM_REHEARSAL, top_p=1.0, rehearsal=whole), [*data(), twin])
    firsts = [s for s in sel.samples if s.trajectory.instruction == "c" and s.index == 0]
    assert len(firsts) == 1


def test_the_curriculum_ranks_the_whole_replay() -> None:
    # 2000 failures of task b and one success of a (the top A_instr): as in the reference and
    # Filtered BC, every trajectory of the replay is ranked, so the rare success is imitated
    # every iteration
    replay = [*(trajectory("b", [0.5, 0.2, 0.6], False, 10) for _ in range(2000)), data()[0]]
    rl = learner()
    for _ in range(3):
        sel = select(rl, replay)
        assert {("a", 0), ("a", 1), ("a", 2)} <= kept(sel.samples)


def test_without_the_curriculum_every_trajectory_goes_to_the_step_filter() -> None:
    sel = select(learner(("step_filter",), top_p=0.5), data())
    assert kept(sel.samples) == kept(select(learner(top_p=1.0), data()).samples)
    assert sel.stats["train/curriculum_kept_frac"] == 1.0
    assert "train/v_instr_mean" not in sel.stats and sel.instr_advantages is None


def test_without_the_step_filter_every_step_of_the_chosen_is_imitated() -> None:
    sel = select(learner(("curriculum",), top_p=1.0), data())
    assert kept(sel.samples) == EVERY and sel.stats["train/step_filter_kept_frac"] == 1.0
    assert sel.stats["train/success_steps_dropped_frac"] == 0.0
    assert "train/a_step_mean" not in sel.stats
    sel = select(learner(("curriculum",), top_p=0.5), data())  # a and d
    assert kept(sel.samples) == {k for k in EVERY if k[0] in "ad"}


def test_a_flat_step_critic_keeps_by_position() -> None:
    # a flat critic: A = lam^(H-h) = 1/32 1/16 1/8 1/4 1/2 1, threshold 1/10: the first two go;
    # with lam 0.8 the weights are .33 .41 .51 .64 .8 1, all kept
    runs = [trajectory(n, [0.3] * 6, success=True, max_steps=10) for n in "ef"]
    sel = select(learner(top_p=1.0), runs)
    assert kept(sel.samples) == {(n, i) for n in "ef" for i in range(2, 6)}
    assert sel.stats["train/success_steps_dropped_frac"] == pytest.approx(4 / 12)
    assert sel.stats["train/step_value_spread"] == 0.0
    sel = select(learner(top_p=1.0, lam=0.8), runs)
    assert kept(sel.samples) == {(n, i) for n in "ef" for i in range(6)}
    # a failure under a flat critic: every A is 0 (V(s') = V(s)) but the last (0 - .3): none kept
    failure = trajectory("e", [0.3] * 6, success=False, max_steps=10)
    assert select(learner(top_p=1.0), [failure]).samples == []


def _changing(trajectories: list[Trajectory]) -> list[Trajectory]:
    """`data()` with a's middle screen changed: a has no no-op step; every other unrewarded
    step of the data leaves the screen as it was (their screens are all alike)."""
    a = trajectories[0]
    a.steps[1].observation.elements = [UIElement("x", "button", "opened")]
    return trajectories


def test_skip_noops_after_the_step_filter_or_every_step() -> None:
    runs = _changing(data())
    assert [t.is_noop(i) for t in runs for i in range(t.length)] == [
        False, False, False, True, True, False, True, False, True, False
    ]  # fmt: skip
    # after the step filter: of a0 a1 a2 b1 c1 d0 d1, b1 and d0 changed nothing
    sel = select(learner(("curriculum", "step_filter", "skip_noops"), top_p=1.0), runs)
    assert kept(sel.samples) == {("a", 0), ("a", 1), ("a", 2), ("c", 1), ("d", 1)}
    assert sel.stats["train/actor_noops_skipped"] == 2
    assert sel.stats["train/kept_steps"] == 5
    # without a step filter: every step of the chosen, less b0 b1 c0 d0
    sel = select(learner(("curriculum", "skip_noops"), top_p=1.0), runs)
    assert kept(sel.samples) == {("a", 0), ("a", 1), ("a", 2), ("b", 2), ("c", 1), ("d", 1)}
    assert sel.stats["train/actor_noops_skipped"] == 4
    # Filtered BC: the successes a, c, d, less c0 and d0
    config = FilteredBCConfig(selection=["top_p_by_return", "skip_noops"], top_p=1.0)
    sel = select(FilteredBC(SmallAgent(seed=0), config, ActorConfig(), seed=0), runs)
    assert kept(sel.samples) == {("a", 0), ("a", 1), ("a", 2), ("c", 1), ("d", 1)}
    assert sel.stats["train/actor_noops_skipped"] == 2
    assert "train/actor_noops_skipped" not in select(learner(top_p=1.0), runs).stats


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("digirl.selection=[step_filter, curriculum]", "each step once, in the order"),
        ("digirl.selection=[curriculum, curriculum]", "each step once, in the order"),
        ("digirl.selection=[curriculum, top_p_by_return]", "top_p_by_return"),
        ("digirl.selection=[rehearsal, step_filter]", "rehearsal.pick=advantage ranks by"),
        ("filtered_bc.selection=[skip_noops, top_p_by_return]", "each step once, in the order"),
        ("filtered_bc.selection=[skip_noops]", "top_p_by_return is what Filtered BC is"),
        ("filtered_bc.selection=[curriculum]", "curriculum"),
        ("digirl.rehearsal.per_task=0", "digirl.rehearsal.per_task"),
        ("digirl.rehearsal.share=1.5", "digirl.rehearsal.share"),
        ("digirl.rehearsal.pick=best", "digirl.rehearsal.pick"),
    ],
)
def test_bad_selection_lists_are_one_line_config_errors(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        load_config(TrainConfig, None, [override])
    assert "\n" not in str(err.value)


def test_good_selection_lists_load() -> None:
    cfg = load_config(
        TrainConfig,
        None,
        ["digirl.selection=[rehearsal, step_filter, skip_noops]", "digirl.rehearsal.pick=random"],
    )
    assert cfg.digirl.selection == ["rehearsal", "step_filter", "skip_noops"]
    assert DigiRLConfig().selection == ["curriculum", "step_filter"]  # the paper's
    assert FilteredBCConfig().selection == ["top_p_by_return"]


def test_roc_auc() -> None:
    assert roc_auc(torch.tensor([0.9, 0.8, 0.1, 0.3]), [True, True, False, False]) == 1.0
    assert roc_auc(torch.tensor([0.1, 0.5, 0.5]), [True, True, False]) == 0.25
    assert math.isnan(roc_auc(torch.tensor([0.2, 0.4]), [True, True]))


@pytest.fixture(scope="module")
def episodes() -> list[Trajectory]:
    out = collect(24, screen=(48, 80))
    for i, t in enumerate(out):  # fixed ids: the held-out slice is a hash of the id
        t.episode_id = f"episode-{i:03d}"
    return out


def test_critic_warmup_then_actor_and_diagnostics(episodes) -> None:
    critic = CriticConfig(batch_size=8, updates=1)
    config = DigiRLConfig(critic_warmup=2, top_p=1.0)
    actor = ActorConfig(updates=2, batch_size=8)
    rl = DigiRL(SmallAgent(seed=0), config, actor, critic, seed=0)
    train, heldout = split_heldout(episodes)
    assert heldout and train and len(train) + len(heldout) == len(episodes)
    assert len(heldout) < len(episodes) / 2  # about 1 in HELDOUT_EVERY
    assert HELDOUT_EVERY == 10
    assert split_heldout(list(reversed(episodes)))[1] == list(reversed(heldout))  # by id
    before = [p.detach().clone() for p in rl.actor.parameters()]
    critic_before = [p.detach().clone() for p in rl.critics.step.parameters()]
    steps = [s for t in heldout for s in t.steps]
    y = torch.tensor([1.0 if t.success else 0.0 for t in heldout for _ in t.steps])
    for _ in range(2):
        m = rl.update(episodes)
        assert m["train/critic_warmup"] == 1.0 and "train/actor_loss" not in m
        v = rl.critics.step.values([s.observation for s in steps])  # the held-out slice
        assert m["train/critic_brier"] == pytest.approx(float(((v - y) ** 2).mean()), abs=1e-5)
        accuracy = float(((v > 0.5).float() == y).float().mean())
        assert m["train/critic_accuracy"] == pytest.approx(accuracy, abs=1e-6)
        assert m["train/critic_heldout"] == len(heldout)
        assert "train/instr_critic_loss" in m and "train/step_critic_loss" in m
    assert all(torch.equal(a, b) for a, b in zip(before, rl.actor.parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(critic_before, rl.critics.step.parameters()))
    m = rl.update(episodes)  # warm-up over: the actor learns
    assert "train/critic_warmup" not in m and "train/actor_loss" in m
    assert not all(torch.equal(a, b) for a, b in zip(before, rl.actor.parameters()))
    assert rl.state_dict()["iterations"] == 3


def test_the_critics_never_train_on_the_heldout_slice(episodes) -> None:
    critic = CriticConfig(batch_size=8, updates=1)
    actor = ActorConfig(updates=1, batch_size=8)
    rl = DigiRL(SmallAgent(seed=0), DigiRLConfig(), actor, critic, seed=0)
    given: list[list[Trajectory]] = []
    fit = rl.critics.fit

    def recording(data):
        given.append(list(data))
        return fit(data)

    rl.critics.fit = recording  # type: ignore[method-assign]
    train, heldout = split_heldout(usable(episodes))
    rl.update(episodes)
    assert given == [train]
    # only held-out trajectories yet (a run's first ones): the critics train on them
    rl.update(heldout)
    assert given[-1] == heldout


def test_two_separate_critic_heads() -> None:
    rl = DigiRL(SmallAgent(seed=0), DigiRLConfig(), ActorConfig(), CriticConfig(), seed=0)
    first, second = rl.critics.step.value_heads
    assert first[0].weight.data_ptr() != second[0].weight.data_ptr()  # own hidden layers
    assert not torch.equal(first[0].weight, second[0].weight)  # own initialisation
    assert rl.critics.instr is not rl.critics.step
    assert set(rl.modules()) == {"instr_critic", "step_critic"}
