import json
import subprocess
import sys
from dataclasses import replace

import pytest


def run(*args: str, cwd=None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "devicerl", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
    )


def test_help_and_tasks() -> None:
    r = run("--help")
    assert r.returncode == 0 and "tasks" in r.stdout
    r = run("tasks", "synthetic/t*")
    assert r.returncode == 0 and "synthetic/tap" in r.stdout and "synthetic/type" in r.stdout
    r = run("tasks", "nope/x")
    assert r.returncode == 2 and "unknown task or suite" in r.stderr


def test_demo_collects(tmp_path) -> None:
    r = run(
        "demo", "--synthetic", "--episodes", "20", "--devices", "2", "--out", str(tmp_path / "d")
    )
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "d" / "summary.json").read_text())
    assert summary["episodes"] == 20 and summary["env_steps"] >= 20
    again = ("demo", "--synthetic", "--episodes", "5", "--devices", "1", "--out", f"{tmp_path}/d")
    r = run(*again)  # an earlier run is never written into
    assert r.returncode == 2 and "--overwrite" in r.stderr and "--resume" not in r.stderr
    assert json.loads((tmp_path / "d" / "summary.json").read_text())["episodes"] == 20
    assert run(*again, "--overwrite").returncode == 0
    assert json.loads((tmp_path / "d" / "summary.json").read_text())["episodes"] == 5


def test_the_demo_is_the_shipped_setup_on_the_dev_suite() -> None:
    from devicerl.cli.demo import demo_config
    from devicerl.config import config_source, load_config
    from devicerl.runtime.setup.config import TrainConfig

    cfg = demo_config("tuned", budget=2500, eval_episodes=10, seed=3)
    shipped = load_config(TrainConfig, config_source("miniwob-digirl-tuned"))
    assert (cfg.mode, cfg.algo, cfg.env_steps, cfg.seed, cfg.agent.seed) == (
        "online", "digirl", 2500, 3, 3
    )  # fmt: skip
    assert cfg.tasks.train == "miniwob-dev" and cfg.eval.at_end
    assert (cfg.eval.split, cfg.eval.n_tasks, cfg.eval.episodes_per_task) == ("test", 8, 10)
    assert cfg.agent.small == shipped.agent.small and cfg.exploration == shipped.exploration
    # the entropy bonus fades over the same share of the budget as in the setup's 8,000 steps
    assert shipped.actor.entropy is not None and shipped.actor.entropy.fade_versions
    assert cfg.actor.entropy is not None
    fade = round(shipped.actor.entropy.fade_versions * 2500 / 8000)
    assert cfg.actor.entropy.fade_versions == fade
    assert replace(cfg.actor.entropy, fade_versions=None) == replace(
        shipped.actor.entropy, fade_versions=None
    )
    assert replace(cfg.actor, entropy=None) == replace(shipped.actor, entropy=None)
    assert cfg.digirl == shipped.digirl and cfg.critic == shipped.critic
    paper = demo_config("paper", budget=300, eval_episodes=1, seed=0)
    assert paper.actor.entropy is None and paper.exploration.max is None


@pytest.mark.slow
@pytest.mark.timeout(900)  # Chromium, training and an evaluation on a loaded 2-core machine
def test_demo_trains_on_miniwob_and_writes_a_report(tmp_path) -> None:
    """The default demo, shortened: one DigiRL run on MiniWoB++ in Chromium, evaluated on test
    instances at its end."""
    out = tmp_path / "demo"
    r = run("demo", "--budget", "150", "--eval-episodes", "1", "--out", str(out), timeout=600)
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["env_steps"] >= 150 and summary["episodes"] > 0
    evaluation = json.loads((out / "eval.json").read_text())
    assert evaluation["episodes"] == 8 and len(evaluation["per_task"]) == 8  # 8 tasks x 1
    config = (out / "config.yaml").read_text()
    assert "split: test" in config and "train: miniwob-dev" in config
    report = (out / "report.md").read_text()
    line = f"RESULT digirl={evaluation['success_rate']:.3f} "
    assert line in report and line in r.stdout
    assert "| evaluation: trained agent, greedy, test instances" in report
    assert "| training rollouts" in report and "| miniwob/click-test |" in report
    assert (out / "curves" / "success.png").stat().st_size > 5_000
    assert "![success](curves/success.png)" in report
    assert (out / "agent").is_dir()
