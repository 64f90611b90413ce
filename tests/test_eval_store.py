"""`devicerl eval` stores its episodes, so its run can be viewed like a training run."""

from __future__ import annotations

from _runs import devicerl_cli as devicerl

from devicerl.runtime.runs.folder import RunDir


def test_eval_stores_its_trajectories_and_its_run_can_be_viewed(tmp_path) -> None:
    out = tmp_path / "ev"
    r = devicerl(
        "eval", "--out", str(out), "env.name=synthetic", "env.worker=serial", "env.num_envs=2",
        "tasks.train=synthetic/tap", "agent.kind=random", "eval.n_tasks=1",
        "eval.episodes_per_task=5", "logging.tensorboard=false",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    stored = RunDir(out).store().read_all(screenshots=False)
    assert len(stored) == 5 and all(t.phase == "eval" for t in stored)
    assert sorted(t.seed for t in stored) == sorted({t.seed for t in stored})  # 5 instances
    v = devicerl("view", str(out))
    assert v.returncode == 0, v.stderr
    assert "5 of 5 episodes" in v.stdout
    page = (out / "report" / "index.html").read_text()
    assert page.count('class="episode"') == 5
