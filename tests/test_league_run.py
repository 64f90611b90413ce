"""League runs (the one `Trainer`, built by `make_trainer` with its `LeagueRun` observer):
real runs on synthetic devices with small real agents: episodes routed by the mapping, a frozen
policy that never changes while it acts, the generalist learning from a specialist's episodes,
policies added and removed mid-run, PBT and snapshots, the evaluated member and a saved member
evaluated, the single-policy path untouched."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from devicerl.config import config_source, load_config
from devicerl.data.store import TrajectoryStore
from devicerl.errors import ConfigError, DataError
from devicerl.league.persist import load_league
from devicerl.league.state import weights_hash
from devicerl.records import DEFAULT_POLICY
from devicerl.runtime.loop.factory import make_trainer
from devicerl.runtime.loop.league import LeagueRun
from devicerl.runtime.loop.observers import Steering, TrainerObserver
from devicerl.runtime.loop.trainer import Trainer
from devicerl.runtime.runs.folder import RunDir
from devicerl.runtime.setup.config import TrainConfig

EXAMPLE = config_source("league-example")
POLICIES = ("generalist", "taps", "frozen")
#: Fast versions of the example: tiny agents, few updates, in-process devices.
FAST = [
    "env.worker=serial",
    "logging.tensorboard=false",
    "trajectories_per_iter=8",
    "eval.at_end=false",
    "checkpoint_every=2",
    *(f"policies.{p}.agent.small.d_model=32" for p in POLICIES),
    *(
        f"policies.{p}.{k}"
        for p in ("generalist", "taps")
        for k in (
            "actor.updates=2",
            "actor.batch_size=8",
            "critic.updates=1",
        )
    ),
]
#: Each task goes to exactly one policy (no weighted draw), chosen by the mapping.
BY_TASK = {"synthetic/tap": "taps", "synthetic/type": "generalist", "synthetic/steps": "frozen"}
MAPPING = [
    "league.frontier=null",
    "league.mapping=[{tasks: synthetic/tap, policy: taps}, {tasks: synthetic/type, policy: "
    "generalist}, {tasks: synthetic/steps, policy: frozen}]",
]


def _config(*overrides: str) -> TrainConfig:
    return load_config(TrainConfig, str(EXAMPLE), [*FAST, *overrides])


def _trainer(tmp_path: Path, name: str, *overrides: str) -> Trainer:
    cfg = _config(*overrides)
    run = RunDir(tmp_path / name)
    run.create().save_config(cfg)
    trainer = make_trainer(cfg, run)
    _league(trainer)  # a league run is the trainer with its league observer
    return trainer


def _league(trainer: Trainer) -> LeagueRun:
    (league,) = [o for o in trainer.observers if isinstance(o, LeagueRun)]
    return league


class OnIteration(TrainerObserver):
    """Calls ``fn(trainer)`` after each iteration (after the league's own step)."""

    def __init__(self, fn: Callable[[Any], None]) -> None:
        self.fn = fn

    def after_iteration(self, run: Any, metrics: dict[str, Any]) -> None:
        self.fn(run)


def _acting(trainer: Trainer) -> dict:
    """The collector's acting copies, by member name."""
    assert trainer.source is not None
    return trainer.source.copies.policies  # type: ignore[attr-defined]


def _learners(trainer: Trainer) -> dict:
    return {m.name: m.learner for m in trainer.population.trainable()}


def _stored(run: Path) -> list:
    return TrajectoryStore(run / "trajectories").read_all()


def test_episodes_are_routed_by_the_mapping_and_a_frozen_policy_never_changes(tmp_path) -> None:
    trainer = _trainer(tmp_path, "run", *MAPPING, "max_iterations=4")
    league = _league(trainer).league
    frozen = league["frozen"].policy
    before = weights_hash(frozen)
    seen: list[str] = []
    learner_objects = _learners(trainer)

    def watch(t: Trainer) -> None:
        seen.append(weights_hash(_league(t).league["frozen"].policy))
        # one copy of the frozen policy: the collector acts with the league's own object
        assert _acting(t).get("frozen", frozen) is frozen

    trainer.register_observer(OnIteration(watch))
    summary = trainer.run()
    assert summary["iteration"] == 4 and seen == [before] * 4
    assert weights_hash(league["frozen"].policy) == before
    assert set(learner_objects) == {"generalist", "taps"}  # the frozen policy has no learner
    assert trainer.population["frozen"].frozen and trainer.population["frozen"].replay is None

    episodes = [t for t in _stored(tmp_path / "run") if t.steps]
    assert len(episodes) >= 32
    for t in episodes:  # the acting policy is the mapping's, every time (the stored plan)
        assert t.plan is not None and t.plan.policy == BY_TASK[t.task], (t.task, t.plan)
    acted = {t.plan.policy for t in episodes}
    assert acted == set(POLICIES)
    # each step records its policy's version: the frozen one never moves, the others do
    frozen_versions = {
        s.policy_version for t in episodes if t.plan.policy == "frozen" for s in t.steps
    }
    assert frozen_versions == {0}
    tap_versions = {s.policy_version for t in episodes if t.plan.policy == "taps" for s in t.steps}
    assert max(tap_versions) >= 1 and league["taps"].policy.version == 4

    # per-policy replays: own episodes, plus the teacher's for the generalist (learn_from)
    replays = {m.name: list(m.replay) for m in trainer.population.trainable()}
    assert {t.plan.policy for t in replays["taps"]} == {"taps"}
    assert {t.plan.policy for t in replays["generalist"]} == {"generalist", "taps"}
    assert not any(t.plan.policy == "frozen" for r in replays.values() for t in r)

    # the league table and per-policy metrics come from the run folder
    league, _ = load_league(tmp_path / "run" / "league")
    assert league.iteration == 4 and weights_hash(league["frozen"].policy) == before
    assert league.success.count("frozen", "synthetic/steps") > 0
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    keys = set().union(*rows)
    assert {"policy/taps/rollout/success_rate", "policy/generalist/train/actor_loss"} <= keys
    assert (tmp_path / "run" / "agents" / "taps").is_dir()


def test_the_league_table_is_in_the_run_report_and_the_cli(tmp_path, capsys) -> None:
    from devicerl.cli.main import main
    from devicerl.runtime.reports.viewer import ViewConfig, build_report

    trainer = _trainer(tmp_path, "run", *MAPPING, "max_iterations=2")
    trainer.run()
    page = build_report(tmp_path / "run", config=ViewConfig(curves=False)).path.read_text()
    assert (
        '<section id="league">' in page and "teacher -&gt; student: taps -&gt; generalist" in page
    )
    assert "policy taps, " in page and "policy frozen, " in page  # each episode names its policy
    assert main(["league", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "league: iteration 2, 3 policies" in out and "frozen f" in out


def test_add_and_remove_policies_mid_run(tmp_path) -> None:
    trainer = _trainer(tmp_path, "run", "max_iterations=6")
    assert trainer.cfg.league.frontier is not None  # the example's frontier sampling
    spec = trainer.cfg.policies["taps"]
    marks: dict[str, float] = {}

    def change(t: Trainer) -> None:
        it = t.state.iteration
        lr = _league(t)
        if it == 1:  # the frozen policy leaves, a new trainable one takes synthetic/steps
            lr.remove_policy("frozen")
            late = type(spec)(**{**spec.__dict__, "tasks": "synthetic/steps"})
            lr.add_policy("late", late)
            marks["added"] = time.time()
            assert "late" in _learners(t) and "frozen" not in lr.league
            assert "frozen" not in t.population
        if it == 4:
            lr.remove_policy("late")
            marks["removed"] = time.time()
            assert "late" not in _learners(t)

    trainer.register_observer(OnIteration(change))
    trainer.run()
    episodes = [t for t in _stored(tmp_path / "run") if t.steps]
    late = [t for t in episodes if t.plan.policy == "late"]
    assert late, "the added policy played no episode"
    assert min(t.steps[0].started_at for t in late) >= marks["added"]
    # no episode of a removed policy is planned after its removal: past it, only those planned
    # before (one per device at most, their resets still running) may begin; in-flight ones finish
    devices = trainer.cfg.env.num_envs
    assert sum(t.steps[0].started_at >= marks["removed"] for t in late) <= devices
    frozen = [t for t in episodes if t.plan.policy == "frozen"]
    assert sum(t.steps[0].started_at >= marks["added"] for t in frozen) <= devices
    league, _ = load_league(tmp_path / "run" / "league")
    assert set(league.members) == {"generalist", "taps"}
    assert league.counters["added"] == 4 and league.counters["removed"] == 2
    ck = trainer.ckpt.load_latest()
    assert ck is not None and set(ck.state["members"]) == {"generalist", "taps"}


def test_pbt_exploit_rebuilds_the_target_learner_and_snapshots_join(tmp_path) -> None:
    trainer = _trainer(
        tmp_path,
        "run",
        *MAPPING,
        "max_iterations=3",
        "league.pbt.policy=taps",
        "league.pbt.population=2",
        "league.pbt.interval=1",
        "league.snapshot.threshold=0.0",
        "league.snapshot.window=2",
    )
    assert "taps.pbt1" in _learners(trainer)
    learners: list[dict] = []
    trainer.register_observer(OnIteration(lambda t: learners.append(_learners(t))))
    trainer.run()
    league = _league(trainer).league
    exploits = [h for h in league.history if h["event"] == "exploit"]
    assert len(exploits) == 3  # one bottom member per iteration (quantile 0.25 of 2)
    for event, objects in zip(exploits, learners):
        target = event["target"]
        rebuilt = objects[target]
        # the rebuilt learner trains with the target's new hyperparameters, from a fresh
        # optimiser (the 'reset' choice), with the donor's critics
        optimizer = rebuilt.regression.optimizer
        assert optimizer.param_groups[0]["lr"] == pytest.approx(event["hparams"]["actor_lr"])
        assert rebuilt.regression.config.lr == pytest.approx(event["hparams"]["actor_lr"])
        assert rebuilt.config.top_p == pytest.approx(event["hparams"]["top_p"])
        assert not optimizer.state  # no Adam moments yet
        # the donor's critics: equal weights, copied (not shared) into the rebuilt learner
        donor = objects[event["donor"]]
        for key, module in rebuilt.modules().items():
            theirs = donor.modules()[key]
            assert module is not theirs
    snaps = [n for n, m in league.members.items() if m.snapshot]
    assert snaps and all(not league[n].spec.trainable for n in snaps)
    assert not set(snaps) & set(_learners(trainer))
    # no mapping rule sends episodes to a snapshot: the collector holds no copy of one
    assert not set(snaps) & set(_acting(trainer))


def test_the_generalist_is_evaluated_and_a_saved_member_by_its_path(tmp_path) -> None:
    trainer = _trainer(tmp_path, "run", *MAPPING, "max_iterations=2")
    assert trainer.steering.evaluated == "generalist"  # league.generalist
    assert trainer.actor is _league(trainer).league["generalist"].policy
    summary = trainer.run()
    assert summary["league"]["evaluated"] == "generalist"
    taps = load_league(tmp_path / "run" / "league")[0]["taps"].policy
    saved = tmp_path / "run" / "agents" / "taps"
    cfg = load_config(
        TrainConfig,
        None,
        [
            "mode=eval",
            "env.name=synthetic",
            "env.worker=serial",
            "logging.tensorboard=false",
            "tasks.train=synthetic/tap",
            "eval.n_tasks=1",
            "eval.episodes_per_task=3",
            f"agent.path={saved}",
        ],
    )
    evaluator = make_trainer(cfg, RunDir(tmp_path / "eval"))
    assert not any(isinstance(o, LeagueRun) for o in evaluator.observers)
    assert weights_hash(evaluator.actor) == weights_hash(taps)
    assert evaluator.run()["eval"]["episodes"] == 3
    bad = load_config(TrainConfig, None, ["mode=eval", f"agent.path={tmp_path / 'nobody'}"])
    with pytest.raises(DataError, match="nobody"):
        make_trainer(bad, RunDir(tmp_path / "never"))


def test_observers_steer_the_run_through_the_records_they_return(tmp_path) -> None:
    """`make_trainer` registered the league; another observer's record changes only the fields
    it sets, and records apply in registration order (the league's, then this one's)."""
    trainer = _trainer(tmp_path, "run", *MAPPING, "max_iterations=2")
    league = trainer.steering
    assert league.routed == frozenset(POLICIES) and league.evaluated == "generalist"

    class Steer(TrainerObserver):
        def attach(self, run: Any) -> Steering:
            return Steering(evaluated="taps")

        def after_iteration(self, run: Any, metrics: Any) -> Steering:
            return Steering(routed=frozenset({"taps", "generalist"}))

    trainer.register_observer(Steer())
    now = trainer.steering
    assert now.evaluated == "taps" and trainer.actor is _league(trainer).league["taps"].policy
    assert now.assignment is league.assignment and now.destinations == league.destinations
    summary = trainer.run()
    assert summary["league"]["evaluated"] == "taps"
    assert trainer.steering.routed == {"taps", "generalist"}
    assert (tmp_path / "run" / "agent").is_dir()  # the evaluated member's agent


def test_single_policy_configs_take_the_unchanged_path(tmp_path) -> None:
    cfg = load_config(TrainConfig, None, ["env.name=synthetic", "tasks.train=synthetic/tap"])
    assert cfg.policies == {}
    trainer = make_trainer(cfg, RunDir(tmp_path / "r"))
    assert trainer.observers == [] and trainer.steering.assignment is None
    assert list(trainer.population.members) == [DEFAULT_POLICY]
    assert (
        trainer.steering.evaluated == DEFAULT_POLICY
        and trainer.actor is trainer.population[DEFAULT_POLICY].policy
    )
    with pytest.raises(ConfigError, match="online"):
        load_config(TrainConfig, str(EXAMPLE), ["mode=offline", "offline_data=x"])
    with pytest.raises(ConfigError, match=r"league\.mapping\[0\]\.policy: unknown policy 'x'"):
        load_config(TrainConfig, str(EXAMPLE), ["league.mapping=[{policy: x}]"])


def _start(args: list[str], tag: str):
    import os
    import subprocess
    import sys

    env = dict(os.environ, DEVICERL_TEST_TAG=tag)
    return subprocess.Popen(
        [sys.executable, "-m", "devicerl", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_kill_9_mid_run_then_resume_with_league_state_intact(tmp_path) -> None:
    import random
    import signal
    import uuid

    from _runs import tagged_processes

    from devicerl.runtime.runs.checkpoint import CheckpointManager

    run = tmp_path / "run"
    tag = uuid.uuid4().hex
    args = [
        *FAST,
        "checkpoint_every=1",
        "max_iterations=7",
        "league.pbt.policy=taps",
        "league.pbt.population=2",
        "league.pbt.interval=2",
        "league.snapshot.threshold=0.0",
        "league.snapshot.window=4",
    ]
    proc = _start(["train", "--config", str(EXAMPLE), "--out", str(run), *args], tag)
    latest = run / "checkpoints" / "latest"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if latest.exists() and int(latest.read_text().strip()[5:]) >= 3:
            break
        time.sleep(0.1)
    time.sleep(random.Random(3).uniform(0.0, 1.0))
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    ck = CheckpointManager(run / "checkpoints").load_latest()  # verifies every file
    assert ck is not None and ck.iteration >= 3
    killed, killed_pbt = load_league(ck.path / "league")  # checks every weights hash
    assert killed.iteration == ck.iteration and killed_pbt is not None
    assert set(ck.state["members"]) == set(killed.trainable())
    frozen_hash = weights_hash(killed["frozen"].policy)
    episodes = dict(killed.success.episodes)

    proc = _start(["train", "--resume", str(run)], tag)
    rc = proc.wait(timeout=600)
    assert rc == 0, proc.stderr.read() if proc.stderr else ""
    final, final_pbt = load_league(run / "league")
    assert final.iteration == 7
    # the resumed run continued the saved league: same history first, counters that only grew
    assert final.history[: len(killed.history)] == killed.history
    assert final_pbt is not None and final_pbt.members == killed_pbt.members
    assert {"generalist", "taps", "taps.pbt1", "frozen"} <= set(final.members)
    for name, n in episodes.items():
        if name in final.success.episodes:
            assert final.success.episodes[name] >= n, name
    for key, n in killed.counters.items():
        assert final.counters[key] >= n
    assert weights_hash(final["frozen"].policy) == frozen_hash
    summary = json.loads((run / "summary.json").read_text())
    assert summary["iteration"] == 7
    assert not tagged_processes(tag)
