"""The learning comparison behind benchmarks/learning.py and `devicerl demo`, on synthetic
devices: a report with a table, curves and the RESULT line; finished runs are reused."""

from __future__ import annotations

import json

import pytest

from devicerl.runtime.comparison import compare, result_line

SYNTHETIC = [
    "env.name=synthetic",
    "env.worker=serial",
    "env.num_envs=2",
    "tasks.train=synthetic/tap",
    "trajectories_per_iter=8",
    "eval.n_tasks=1",
    "logging.tensorboard=false",
    "checkpoint_every=1000000",
]


@pytest.mark.slow
def test_compare_writes_a_report_and_reuses_finished_runs(tmp_path) -> None:
    kw = dict(systems=("random", "digirl"), budget=200, eval_episodes=10, base=SYNTHETIC)
    report = compare(tmp_path, **kw)
    assert set(report["summary"]) == {"random", "digirl"}
    assert report["result"] == result_line(report["summary"], 200)
    assert report["result"].startswith("RESULT digirl=") and "random=" in report["result"]
    trained = next(r for r in report["runs"] if r["system"] == "digirl")
    assert trained["env_steps"] >= 200 and trained["episodes"] == 10
    assert 0.0 <= trained["success_sampled"] <= 1.0
    assert (tmp_path / "digirl-s0" / "eval-sampled" / "eval.json").exists()
    steps = [p["step"] for p in trained["curve"]]
    assert steps == sorted(steps) and steps[-1] >= 200
    assert all(p["time_s"] >= 0 for p in trained["curve"])
    assert (tmp_path / "learning.png").stat().st_size > 10_000
    assert "| digirl |" in (tmp_path / "report.md").read_text()
    assert json.loads((tmp_path / "comparison.json").read_text())["budget"] == 200

    metrics = tmp_path / "digirl-s0" / "metrics.jsonl"
    before = metrics.stat().st_mtime_ns
    again = compare(tmp_path, **kw)  # same configs: nothing runs again
    assert metrics.stat().st_mtime_ns == before
    assert again["runs"] == report["runs"]
    changed = compare(tmp_path, **{**kw, "systems": ("digirl",)}, extra=["digirl.lam=0.7"])
    assert metrics.stat().st_mtime_ns != before  # a changed config runs again
    assert changed["runs"][0]["system"] == "digirl"

    with pytest.raises(ValueError, match="unknown system 'ppo'"):
        compare(tmp_path, systems=("ppo",))
