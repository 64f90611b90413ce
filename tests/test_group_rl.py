"""Group-relative RL (`devicerl.algos.grpo`, `devicerl.algos.gigpo`): advantages computed by hand,
the clipped surrogate's ratio and clip, group planning and re-runs, whole groups only, a learning
run where the sign of the advantage matters, and groups completed under device crashes in real
subprocess workers."""

from __future__ import annotations

import math
import tempfile

import pytest
import torch

from devicerl.actions import Action
from devicerl.agents.small import SmallAgent
from devicerl.algos.config import ActorConfig, GiGPOConfig, GRPOConfig
from devicerl.algos.gigpo import GiGPO
from devicerl.algos.group_formulas import (
    clipped_surrogate,
    discounted_returns,
    group_advantages,
    kl_k3,
    step_group_advantages,
)
from devicerl.algos.grpo import GRPO
from devicerl.algos.selection import EpisodeAdvantages
from devicerl.config import load_config
from devicerl.records import EndReason, EpisodePlan, Observation, Step, Trajectory, UIElement
from devicerl.runtime.acting.planning import MAX_RETRIES, EpisodePlanner
from devicerl.runtime.loop.factory import make_trainer
from devicerl.runtime.loop.task_groups import TaskGroupBuffer
from devicerl.runtime.runs.folder import RunDir
from devicerl.runtime.setup.config import TrainConfig
from devicerl.tasks import Task, TaskSampler


def test_group_advantages_by_hand() -> None:
    r = torch.tensor([1.0, 0.0, 0.0, 1.0])
    # mean 0.5, population std 0.5: +1 / -1
    assert torch.allclose(group_advantages(r), torch.tensor([1.0, -1.0, -1.0, 1.0]), atol=1e-5)
    assert group_advantages(r, normalise=False).tolist() == [0.5, -0.5, -0.5, 0.5]  # Dr. GRPO
    assert group_advantages(torch.ones(3)).tolist() == [0.0, 0.0, 0.0]  # nothing to learn
    assert discounted_returns(torch.tensor([0.0, 0.0, 1.0]), 0.5).tolist() == [0.25, 0.5, 1.0]


def test_step_groups_join_identical_states_across_episodes() -> None:
    # episode 0 visits A then B; episode 1 visits A then C; episode 2 visits A, A (a loop)
    keys = [["A", "B"], ["A", "C"], ["A", "A"]]
    returns = [torch.tensor([0.9, 1.0]), torch.tensor([0.0, 0.0]), torch.tensor([0.0, 0.0])]
    adv = step_group_advantages(keys, returns, normalise=False)
    # step group A: returns 0.9, 0.0, 0.0, 0.0 (mean 0.225): each against it
    assert adv[0][0] == pytest.approx(0.675) and adv[1][0] == pytest.approx(-0.225)
    assert adv[2].tolist() == pytest.approx([-0.225, -0.225])
    assert adv[0][1] == 0.0 and adv[1][1] == 0.0  # B and C are alone in their step groups


def _page(label: str) -> Observation:
    e = UIElement("b", "button", label, bbox=(10, 10, 60, 30), clickable=True)
    return Observation("press the button", (160, 210), elements=[e])


def _episode(group: str, screens: str, rewards: list[float], version: int = 0) -> Trajectory:
    t = Trajectory(task="t/x", instruction="press the button", seed=1, max_steps=5)
    t.plan = EpisodePlan(group=group, group_size=3)
    for s, r in zip(screens, rewards):
        t.steps.append(Step(_page(s), Action.tap(0.2, 0.1), reward=r, policy_version=version))
    t.final_observation = _page("end")
    return t.end(EndReason.SUCCESS if rewards[-1] else EndReason.FAILURE)


def _group() -> list[Trajectory]:
    return [
        _episode("g", "AB", [0.0, 1.0]),
        _episode("g", "AC", [0.0, 0.0]),
        _episode("g", "AA", [0.0, 0.0]),
    ]


def _agent() -> SmallAgent:
    return SmallAgent(d_model=32, n_layers=1, seed=0, epsilon=0.0)


def test_grpo_and_gigpo_selection_by_hand() -> None:
    data = _group()
    grpo = GRPO(_agent(), GRPOConfig(group_size=3, normalise=False), ActorConfig())
    sel = grpo.selection
    from devicerl.algos.selection import run_steps

    out = run_steps(sel, data)
    # returns 1, 0, 0: mean 1/3; every step of an episode takes its episode's advantage
    by_episode = {id(t): a for t, a in zip(data, [2 / 3, -1 / 3, -1 / 3])}
    assert [s.advantage for s in out.samples] == pytest.approx(
        [by_episode[id(s.trajectory)] for s in out.samples]
    )
    assert len(out.samples) == 6 and out.stats["train/groups"] == 1
    gigpo = GiGPO(
        _agent(), GRPOConfig(group_size=3, normalise=False), GiGPOConfig(gamma=0.5), ActorConfig()
    )
    out = run_steps(gigpo.selection, _group())
    adv = {(s.trajectory.steps[0].observation.elements[0].text, s.index, i // 2): s.advantage
           for i, s in enumerate(out.samples)}  # fmt: skip
    # anchor state A (first step of each, second of episode 2): returns 0.5, 0, 0, 0 (gamma 0.5)
    assert adv[("A", 0, 0)] == pytest.approx(2 / 3 + (0.5 - 0.125))
    assert adv[("A", 0, 1)] == pytest.approx(-1 / 3 - 0.125)
    assert adv[("A", 1, 2)] == pytest.approx(-1 / 3 - 0.125)  # the loop's second A
    assert adv[("A", 1, 0)] == pytest.approx(2 / 3)  # B is alone: episode advantage only
    assert out.stats["train/step_groups_frac"] == pytest.approx(4 / 6)


def test_uniform_groups_teach_nothing_and_are_counted() -> None:
    data = [_episode("u", "AB", [0.0, 0.0]) for _ in range(3)]
    from devicerl.algos.selection import run_steps

    out = run_steps(GRPO(_agent(), GRPOConfig(group_size=3), ActorConfig()).selection, data)
    assert out.samples == [] and out.stats["train/groups_uniform"] == 1


def test_incomplete_and_stale_groups_are_left_out() -> None:
    from devicerl.algos.selection import run_steps

    agent = _agent()
    agent.version = 10
    fresh = [_episode("a", "AB", [0.0, r], version=9) for r in (1.0, 0.0, 0.0)]
    stale = [_episode("b", "AB", [0.0, r], version=2) for r in (1.0, 0.0, 0.0)]
    short = [_episode("c", "AB", [0.0, 1.0], version=9)]
    learner = GRPO(agent, GRPOConfig(group_size=3, max_staleness=4), ActorConfig())
    out = run_steps(learner.selection, fresh + stale + short)
    assert {s.trajectory.plan.group for s in out.samples} == {"a"}
    assert out.stats["train/groups_stale"] == 1 and out.stats["train/groups_incomplete"] == 1
    assert out.stats["train/staleness_mean"] == 1


def test_the_clipped_surrogate_ratio_and_clip() -> None:
    logp = torch.tensor([0.0, 0.0, 0.0], requires_grad=True)
    same = torch.zeros(3)
    adv = torch.tensor([1.0, -1.0, 1.0])
    loss, ratio, held = clipped_surrogate(logp, same, same, adv, clip=0.2, weight_cap=5.0)
    assert ratio.tolist() == [1.0, 1.0, 1.0] and not held.any()  # fresh data: ratio 1
    loss.sum().backward()
    assert logp.grad is not None and logp.grad.tolist() == [-1.0, 1.0, -1.0]
    # the new policy moved far (ratio e^1 on a positive, e^-1 on a negative advantage):
    # the clip holds both and their gradient is gone
    moved = torch.tensor([1.0, -1.0, 0.1], requires_grad=True)
    loss, ratio, held = clipped_surrogate(moved, same, same, adv, clip=0.2, weight_cap=5.0)
    assert held.tolist() == [True, True, False]
    loss.sum().backward()
    assert moved.grad is not None and moved.grad[:2].tolist() == [0.0, 0.0]
    # stale data: behaviour log-prob below the proximal one weights the term up (capped)
    loss_w, _, _ = clipped_surrogate(
        torch.zeros(1), torch.zeros(1), torch.tensor([-10.0]), torch.ones(1), 0.2, 5.0
    )
    assert loss_w.item() == pytest.approx(-5.0)
    assert kl_k3(torch.zeros(2), torch.zeros(2)).tolist() == [0.0, 0.0]
    assert (kl_k3(torch.tensor([0.0]), torch.tensor([-1.0])) > 0).all()


def test_ratio_is_one_on_fresh_data_and_the_clip_engages_on_stale_data() -> None:
    agent = _agent()
    data = _group()
    with torch.no_grad():  # record the behaviour log-probs as acting would
        for t in data:
            obs = [s.observation for s in t.steps]
            for s, lp in zip(t.steps, agent.log_prob(obs, [s.action for s in t.steps]).tolist()):
                s.log_prob = lp
    cfg = ActorConfig(lr=1e-3, updates=1, batch_size=6)
    m = GRPO(agent, GRPOConfig(group_size=3), cfg).update(data)
    assert m["train/ratio_mean"] == pytest.approx(1.0, abs=1e-5) and m["train/clip_frac"] == 0
    # many large steps away from the behaviour policy: the ratio leaves [0.8, 1.2]
    big = ActorConfig(lr=0.05, updates=30, batch_size=6)
    m = GRPO(agent, GRPOConfig(group_size=3), big).update(data)
    assert m["train/clip_frac"] > 0


def test_planner_hands_out_groups_and_reruns_cut_members() -> None:
    tasks = [Task("synthetic/tap"), Task("synthetic/type")]
    planner = EpisodePlanner(TaskSampler(tasks, seed=3), group_size=3, name="p.")
    first = [planner.next() for _ in range(3)]
    assert len({(i.task.name, i.seed, i.plan.group) for i in first}) == 1
    assert first[0].plan.group == "p.0" and first[0].plan.group_size == 3
    nxt = planner.next()
    assert nxt.plan.group == "p.1"
    cut = Trajectory(task=nxt.task.name, instruction="", seed=nxt.seed, plan=nxt.plan)
    cut.end(EndReason.TRUNCATED, cause="worker died")
    assert planner.retry(cut)
    again = planner.next()
    assert (again.task.name, again.seed, again.plan) == (nxt.task.name, nxt.seed, nxt.plan)
    for _ in range(MAX_RETRIES - 1):
        assert planner.retry(cut)
    assert not planner.retry(cut)  # its re-runs are used up


def test_group_buffer_releases_whole_groups_and_drops_stuck_ones() -> None:
    buf = TaskGroupBuffer(max_age=2)
    a, b = _group(), [_episode("h", "AB", [0.0, 1.0])]
    assert buf.hold(a[0], 0) == [] and buf.hold(b[0], 0) == [] and buf.hold(a[1], 1) == []
    assert buf.hold(a[2], 1) == a and buf.released == 1
    assert buf.expire(1) == 0 and buf.expire(2) == 1 and buf.dropped == 1 and buf.waiting == 0
    plain = Trajectory(task="t", instruction="")
    assert buf.hold(plain, 0) == [plain]


FAST = [
    "env.name=synthetic",
    "env.num_envs=4",
    "tasks.train=synthetic/tap",
    "logging.tensorboard=false",
    "trajectories_per_iter=16",
    "eval.n_tasks=1",
    "eval.episodes_per_task=100",
    "eval.greedy=false",
    "actor.lr=3e-3",
    "actor.updates=8",
    "actor.batch_size=32",
    "grpo.group_size=4",
]


def _train(folder: str, *overrides: str) -> tuple[dict, RunDir]:
    cfg = load_config(TrainConfig, None, [*FAST, *overrides])
    run = RunDir(folder)
    run.create().save_config(cfg)
    return make_trainer(cfg, run).run(), run


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_grpo_learns_and_the_sign_of_the_advantage_matters(monkeypatch) -> None:
    with tempfile.TemporaryDirectory() as d:
        base, _ = _train(f"{d}/u", "env.worker=serial", "mode=eval")
        learned, run = _train(f"{d}/g", "env.worker=serial", "algo=grpo", "env_steps=1000")
        metrics = run.read_metrics()
        original = EpisodeAdvantages.__call__

        def flipped(self, sel):  # type: ignore[no-untyped-def]
            out = original(self, sel)
            for c in out.chosen:
                c.advantage = -c.advantage
            return out

        monkeypatch.setattr(EpisodeAdvantages, "__call__", flipped)
        wrong, _ = _train(f"{d}/w", "env.worker=serial", "algo=grpo", "env_steps=1000")
    untrained = base["eval"]["success_rate"]
    assert learned["eval"]["success_rate"] >= untrained + 0.4, (learned["eval"], untrained)
    assert wrong["eval"]["success_rate"] <= untrained + 0.05, (wrong["eval"], untrained)
    assert any(m.get("train/groups", 0) > 0 for m in metrics)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_gigpo_trains_through_the_cli_config() -> None:
    with tempfile.TemporaryDirectory() as d:
        s, run = _train(
            f"{d}/g",
            "env.worker=serial",
            "algo=gigpo",
            "env_steps=300",
            "tasks.train=synthetic/steps",
        )
        metrics = run.read_metrics()
    assert s["iteration"] > 0
    frac = [m["train/step_groups_frac"] for m in metrics if "train/step_groups_frac" in m]
    assert frac and not math.isnan(frac[-1]) and frac[-1] > 0  # identical screens were grouped


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_groups_stay_whole_when_devices_crash() -> None:
    """Real subprocess workers whose devices die on some steps: every group the learner gets
    holds ``group_size`` labelled episodes of one instance, cut members were re-run."""
    crashy = "env.options={faults: {die: 0.05}}"
    with tempfile.TemporaryDirectory() as d:
        s, run = _train(
            f"{d}/c", "env.worker=subprocess", "env.num_envs=3", "algo=grpo", "env_steps=250",
            "eval.at_end=false", crashy,
        )  # fmt: skip
        stored = run.store().read_all()
        ck = run.checkpoint_manager().load_latest()
        replay_ids = set(ck.state["members"]["agent"]["replay"]["episode_ids"])
    truncated = [t for t in stored if t.is_truncated]
    assert truncated, "no device crashed: the test needs crashes"
    by_id = {t.episode_id: t for t in stored}
    groups: dict[str, list[Trajectory]] = {}
    for i in replay_ids:
        t = by_id[i]
        groups.setdefault(t.plan.group, []).append(t)
    assert groups and all(len(g) == 4 for g in groups.values())
    for members in groups.values():
        assert len({(t.task, t.seed) for t in members}) == 1
        assert not any(t.is_truncated for t in members)
    rerun = {t.plan.group for t in truncated} & set(groups)
    assert rerun, "a group with a crashed member was completed by a re-run"
    assert s["iteration"] > 0
