import io
import json
import math
import sys
import types
from dataclasses import dataclass, field

import numpy as np
import pytest
import yaml

from devicerl.config import REDACTED
from devicerl.errors import ConfigError, DataError
from devicerl.records import EndReason, Judgement, Trajectory
from devicerl.runtime.acting.collector import CollectorStats
from devicerl.runtime.acting.episode_counts import EpisodeCounts
from devicerl.runtime.loop.evaluation import EvalResult
from devicerl.runtime.loop.trainer import TrainState
from devicerl.runtime.runs.folder import RunDir
from devicerl.runtime.runs.metrics import LoggingConfig, MetricsLogger, read_metrics
from devicerl.runtime.runs.progress import RateProgress


def test_jsonl_and_tensorboard(tmp_path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with MetricsLogger(tmp_path) as log:
        log.log({"rollout/success_rate": 0.25, "pool/steps_per_s": np.float32(41.5)}, step=100)
        log.log({"train/actor_loss": float("nan"), "train/policy_lag": 2}, step=250)
    recs = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in recs] == [100, 250]
    assert recs[0]["pool/steps_per_s"] == 41.5 and recs[1]["train/actor_loss"] is None
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    assert set(acc.Tags()["scalars"]) >= {"rollout/success_rate", "train/policy_lag"}
    (event,) = acc.Scalars("rollout/success_rate")
    assert (event.step, event.value) == (100, 0.25)
    assert math.isnan(acc.Scalars("train/actor_loss")[0].value)


def test_names_and_values_are_checked(tmp_path) -> None:
    with MetricsLogger(tmp_path, LoggingConfig(tensorboard=False)) as log:
        with pytest.raises(ValueError, match=r"must be namespaced, e\.g\. 'train/loss'"):
            log.log({"loss": 1.0}, step=1)
        with pytest.raises(ValueError, match="'train/x': 'abc' is not a number"):
            log.log({"train/x": "abc"}, step=1)
    assert not (tmp_path / "tb").exists() and read_metrics(tmp_path / "metrics.jsonl") == []


def test_read_metrics_torn_and_bad_lines(tmp_path) -> None:
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"step": 1, "a/b": 1}\n{"step": 2, "a/b"')
    assert read_metrics(p) == [{"step": 1, "a/b": 1}]
    p.write_text('{"step": 1}\nnot json\n{"step": 3}\n')
    with pytest.raises(DataError, match=r"metrics\.jsonl:2: malformed"):
        read_metrics(p)


def test_wandb_missing_is_a_config_error(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # makes `import wandb` fail
    with pytest.raises(ConfigError, match=r"logging\.wandb_project is set but the wandb package"):
        MetricsLogger(tmp_path, LoggingConfig(tensorboard=False, wandb_project="devicerl"))


@dataclass
class _RunCfg:
    lr: float = 0.1
    api_key: str = "sk-secret"


def test_wandb_calls_with_redacted_config(tmp_path, monkeypatch) -> None:
    """W&B is a network service: a stand-in module records what devicerl asks of it."""
    calls: list = []

    class Run:
        def log(self, values, step):
            calls.append(("log", values, step))

        def finish(self):
            calls.append(("finish",))

    def init(**kw):
        calls.append(("init", kw))
        return Run()

    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(init=init))
    cfg = LoggingConfig(tensorboard=False, wandb_project="devicerl")
    with MetricsLogger(tmp_path / "run7", cfg, run_config=_RunCfg()) as log:
        log.log({"eval/success_rate": 0.5}, step=3)
    (_, init_kw), log_call, finish = calls
    assert init_kw["name"] == "run7" and init_kw["dir"] == str(tmp_path / "run7")
    assert init_kw["config"] == {"lr": 0.1, "api_key": REDACTED}
    assert log_call == ("log", {"eval/success_rate": 0.5}, 3) and finish == ("finish",)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_plain_and_rich() -> None:
    out = io.StringIO()
    with RateProgress("collect", total=4, stream=out, log_every_s=0.0) as bar:
        bar.update(1, steps=5, successes=1)
        bar.update(1, steps=3, successes=0, loss=0.25)
    assert bar.completed == 2 and bar.steps == 8 and bar.success_rate == 0.5
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and "2/4 episodes  8 steps" in lines[-1]
    assert "steps/s  success 50.0%" in lines[-1] and "loss 0.25" in lines[-1]
    tty = _Tty()
    with RateProgress("train", total=2, unit="updates", stream=tty) as bar:
        bar.update(2, steps=10, successes=2)
    assert "train" in tty.getvalue() and "success 100.0%" in tty.getvalue()


@dataclass
class _Cfg:
    name: str = "x"
    token: str = ""
    logging: LoggingConfig = field(default_factory=LoggingConfig)


def test_run_dir_layout_and_config(tmp_path) -> None:
    run = RunDir(tmp_path / "r").create()
    assert run.trajectories.is_dir() and run.checkpoints.is_dir()
    cfg = _Cfg(token="tok-123", logging=LoggingConfig(wandb_project="p"))
    run.save_config(cfg)
    text = run.config_path.read_text()
    assert "tok-123" not in text and yaml.safe_load(text)["logging"]["wandb_project"] == "p"
    again = run.load_config(_Cfg, ["name=y"])
    assert again.name == "y" and again.token == "" and again.logging.wandb_project == "p"
    manager = run.checkpoint_manager(keep=2)
    assert manager.root == run.checkpoints and manager.load_latest() is None
    with run.metrics_logger(LoggingConfig(tensorboard=False)) as log:
        log.log({"rollout/success_rate": 1.0}, step=7)
    assert run.read_metrics()[0]["step"] == 7
    assert json.loads(run.metrics_path.read_text())["rollout/success_rate"] == 1.0


def test_one_counting_rule_for_collector_trainer_and_eval() -> None:
    """Collector, trainer and evaluation count the same mix of episodes the same way: truncated
    and unlabelled ones apart, successes only among complete labelled ones."""

    def traj(end: EndReason, success: bool = False, verdict: str | None = None) -> Trajectory:
        t = Trajectory(task="t", instruction="i", end_reason=end, success=success)
        if verdict is not None:
            t.judgement = Judgement(verdict={"label": verdict}, native_success=success)
        return t

    mix = [
        traj(EndReason.SUCCESS, True),
        traj(EndReason.SUCCESS, True, verdict="success"),
        traj(EndReason.FAILURE),
        traj(EndReason.MAX_STEPS),
        traj(EndReason.TRUNCATED),
        traj(EndReason.AGENT_ENDED, verdict="unknown"),
    ]
    counters: list[EpisodeCounts] = [CollectorStats(), TrainState(), EvalResult()]
    for c in counters:
        kept = [c.count(t) for t in mix]
        assert kept == [True, True, True, True, False, False]
        assert (c.episodes, c.successes, c.truncated, c.unlabelled) == (4, 2, 1, 1)
        assert c.success_rate == 0.5
        assert c.count_metrics()["judge/unlabelled"] == 1
