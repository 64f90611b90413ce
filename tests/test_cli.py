import json
import subprocess
import sys

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


@pytest.mark.slow
@pytest.mark.timeout(900)  # Chromium, training and two evaluations on a loaded 2-core machine
def test_demo_trains_on_miniwob_and_writes_a_report(tmp_path) -> None:
    """The default demo, shortened: DigiRL on MiniWoB++ in Chromium vs the random policy."""
    out = tmp_path / "demo"
    r = run("demo", "--budget", "150", "--eval-episodes", "1", "--out", str(out), timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-3].startswith("RESULT digirl=")
    report = json.loads((out / "comparison.json").read_text())
    assert set(report["summary"]) == {"random", "digirl"}
    trained = report["runs"][1]
    assert trained["system"] == "digirl" and trained["env_steps"] >= 150 and trained["curve"]
    assert report["summary"]["digirl"]["seeds"] == 1
    assert (out / "learning.png").stat().st_size > 10_000
    assert "| digirl |" in (out / "report.md").read_text()
    assert (out / "digirl-s0" / "agent").is_dir() and (out / "digirl-s0" / "config.yaml").exists()
