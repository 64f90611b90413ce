"""benchmarks/filter_audit.py: per task, what DigiRL's curriculum and step filter do to
successes, hand-computed with fixed critics, and the same numbers read from a run folder's
newest checkpoint and store."""

from __future__ import annotations

import filter_audit as fa  # benchmarks/ (see conftest.py)
import pytest
import torch
from _runs import collect
from selection_helpers import learner, trajectory

from devicerl.algos.config import RehearsalConfig
from devicerl.algos.digirl import DigiRL
from devicerl.config import load_config
from devicerl.records import DEFAULT_POLICY
from devicerl.runtime.runs.folder import RunDir
from devicerl.runtime.setup.config import TrainConfig
from devicerl.runtime.setup.learners import make_learner

REHEARSAL = ("curriculum", "rehearsal", "step_filter")


def runs() -> list:
    return [
        trajectory("e", [0.3] * 6, success=True, max_steps=10),  # flat critic, V_instr .5
        trajectory("a", [0.1, 0.3, 0.5, 0.7, 0.9, 0.95], success=True, max_steps=10),  # .3
        trajectory("b", [0.5, 0.2, 0.6], success=False, max_steps=10),  # V_instr .1
    ]


def test_the_curriculum_and_a_flat_critic_by_hand() -> None:
    # A_instr: a .7, e .5, b -.1; top-p .3 of 3 keeps a alone
    out = fa.audit_trajectories(learner(top_p=0.3), runs())
    # e, flat: A_step = lam^(H-h) = 1/32 1/16 1/8 1/4 1/2 1 against 1/horizon = 0.1
    e = dict(trajectories=1, success_rate=1, v_instr=0.5, in_curriculum=0, mean_length=6)
    e |= dict(steps_dropped=2 / 6, first_step_dropped=1, value_spread=0, rehearsed_instructions=0)
    assert out["e"] == pytest.approx(e | dict(steps_imitated=0))
    # a, rising: A_1 = 1/32 + (31/32) 0.2 = 0.225, every later A larger: all kept
    a = dict(trajectories=1, success_rate=1, v_instr=0.3, in_curriculum=1, mean_length=6)
    a |= dict(steps_dropped=0, first_step_dropped=0, value_spread=0.85, rehearsed_instructions=0)
    assert out["a"] == pytest.approx(a | dict(steps_imitated=1))
    assert out["b"] == pytest.approx(dict(trajectories=1, success_rate=0, v_instr=0.1))
    text = fa.table({"r": out})
    row_e = "| e | 1.000 | 1.000 | 0.500 | 0.000 | 6.000 | 0.333 | 1.000 | 0.000 | 0.000 | 0.000 |"
    assert row_e in text
    assert "| b | 1.000 | 0.000 | 0.100 | - | - | - | - | - | - | - |" in text
    # rehearsal brings e's success into the curriculum; the step filter still drops 2 steps
    one = RehearsalConfig(per_task=1)
    out = fa.audit_trajectories(learner(REHEARSAL, top_p=0.3, rehearsal=one), runs())
    assert out["e"]["in_curriculum"] == 1 and out["e"]["steps_dropped"] == pytest.approx(2 / 6)
    assert out["e"]["steps_imitated"] == pytest.approx(4 / 6)
    assert out["e"]["rehearsed_instructions"] == 1
    # rehearsed whole: the actor gets all 6 steps, though the filter alone would drop 2
    whole = RehearsalConfig(per_task=1, whole=True)
    out = fa.audit_trajectories(learner(REHEARSAL, top_p=0.3, rehearsal=whole), runs())
    assert out["e"]["steps_dropped"] == pytest.approx(2 / 6) and out["e"]["steps_imitated"] == 1
    # no-op skipping: every screen of `runs()` looks the same, so only each success's last
    # (rewarding) step is imitated
    out = fa.audit_trajectories(learner((*REHEARSAL, "skip_noops"), top_p=0.3, rehearsal=whole),
                                runs())  # fmt: skip
    assert out["e"]["steps_imitated"] == pytest.approx(1 / 6)
    assert out["a"]["steps_imitated"] == pytest.approx(1 / 6)
    # the random pick: no highest-advantage pick to count
    rand = RehearsalConfig(per_task=1, pick="random")
    out = fa.audit_trajectories(learner(REHEARSAL, top_p=0.3, rehearsal=rand), runs())
    assert out["e"]["in_curriculum"] == 1 and out["e"]["rehearsed_instructions"] == 0


def test_rehearsed_instructions_count_what_the_highest_advantage_pick_repeats() -> None:
    # three successes of task t/e, instructions e, e, f, all V_instr .5 (tied): the pick of 2
    # takes the first two in replay order, one instruction; the pick of 3 holds both
    data = [trajectory(name, [0.3] * 2, success=True, max_steps=10) for name in "eef"]
    data[2].task = "t/e"
    for per_task, distinct in ((2, 1), (3, 2)):
        rehearsal = RehearsalConfig(per_task=per_task)
        out = fa.audit_trajectories(learner(REHEARSAL, top_p=0.3, rehearsal=rehearsal), data)
        assert out["e"]["rehearsed_instructions"] == distinct


def test_a_run_folder_is_audited_under_its_checkpoints_critics(tmp_path) -> None:
    cfg = load_config(TrainConfig, None, ["algo=digirl", "env.name=synthetic"])
    run = RunDir(tmp_path / "run").create()
    run.save_config(cfg)
    rl = make_learner(cfg, cfg.agent.make())
    assert isinstance(rl, DigiRL)
    with torch.no_grad():  # weights a freshly built learner does not have
        for p in [*rl.critics.step.parameters(), *rl.critics.instr.parameters()]:
            p.add_(0.05 * torch.randn_like(p))
    # as the trainer saves a single-policy run's learner modules: under its member's name
    models = {f"{DEFAULT_POLICY}.{k}": m.state_dict() for k, m in rl.modules().items()}
    run.checkpoint_manager().save(1, models, {}, {"iteration": 1})
    trajs = collect(30, screen=(48, 80))  # random-policy episodes
    with run.writer() as w:
        w.extend(trajs)
    # the step critic scored in batches across episodes: each episode's values as scored alone
    batched = list(fa.success_step_values(rl, trajs, batch=7))
    for t, v in zip(trajs, batched, strict=True):
        alone = rl.critics.step.values([s.observation for s in t.steps])
        assert torch.allclose(v, alone, atol=1e-5)
    out, expected = fa.audit(run.path), fa.audit_trajectories(rl, trajs)
    assert out and set(out) == set(expected)
    for task, row in expected.items():
        assert out[task] == pytest.approx(row)
    fresh = fa.audit_trajectories(make_learner(cfg, cfg.agent.make()), trajs)  # type: ignore[arg-type]
    assert any(fresh[t]["v_instr"] != pytest.approx(out[t]["v_instr"]) for t in out)
    loaded = fa.load_learner(run.path)
    for name, module in rl.modules().items():
        theirs = loaded.modules()[name].state_dict()
        assert all(torch.equal(v, theirs[k]) for k, v in module.state_dict().items())

    cfg = load_config(TrainConfig, None, ["algo=filtered_bc", "env.name=synthetic"])
    other = RunDir(tmp_path / "bc").create()
    other.save_config(cfg)
    with pytest.raises(SystemExit, match=r"bc is a filtered_bc run"):
        fa.audit(other.path)


def test_a_checkpoint_without_the_single_policys_critics_is_refused(tmp_path) -> None:
    cfg = load_config(TrainConfig, None, ["algo=digirl", "env.name=synthetic"])
    run = RunDir(tmp_path / "league").create()
    run.save_config(cfg)
    rl = make_learner(cfg, cfg.agent.make())
    assert rl is not None
    models = {f"member.{k}": m.state_dict() for k, m in rl.modules().items()}
    run.checkpoint_manager().save(1, models, {}, {"iteration": 1})
    with pytest.raises(SystemExit, match=r"holds no agent\.instr_critic"):
        fa.load_learner(run.path)
