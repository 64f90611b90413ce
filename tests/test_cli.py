import json
import subprocess
import sys


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "devicerl", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def test_help_and_tasks() -> None:
    r = run("--help")
    assert r.returncode == 0 and "tasks" in r.stdout
    r = run("tasks", "synthetic/t*")
    assert r.returncode == 0 and "synthetic/tap" in r.stdout and "synthetic/type" in r.stdout
    r = run("tasks", "nope/x")
    assert r.returncode == 2 and "unknown task or suite" in r.stderr


def test_demo_collects(tmp_path) -> None:
    r = run("demo", "--episodes", "20", "--devices", "2", "--out", str(tmp_path / "d"))
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "d" / "summary.json").read_text())
    assert summary["episodes"] == 20 and summary["env_steps"] >= 20
