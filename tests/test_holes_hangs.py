"""Rule: a task's code cannot hang the run. A page-side check runs under a time limit, and one
that never returns stops the run with one line naming the task and the check (real headless
Chromium); every worker kind, the in-process serial one included, enforces the configured
reset and step timeouts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _holes import cli

from devicerl.actions import Action
from devicerl.envs import EnvSpec
from devicerl.errors import TaskError
from devicerl.pool import EnvPool
from devicerl.pool.supervisor import SupervisorConfig
from devicerl.tasks import Task
from devicerl.tasks.custom import load_suite

PAGES = Path(__file__).resolve().parents[1] / "examples" / "custom-suite" / "pages"
FOREVER = "(() => { while (true) {} })()"


def _suite(folder: Path, success: str = "false", failure: str = "") -> Path:
    shutil.copy(PAGES / "press-color.html", folder / "p.html")
    shutil.copy(PAGES / "common.js", folder / "common.js")
    check = f"failure: '{failure}'" if failure else ""
    (folder / "hang.yaml").write_text(
        f"tasks: [{{name: t, page: p.html, success: '{success}', {check}}}]\n"
    )
    return folder / "hang.yaml"


@pytest.mark.browser
@pytest.mark.timeout(120)
def test_a_check_that_never_returns_is_stopped_and_named(tmp_path) -> None:
    from devicerl.envs import make

    (task,) = load_suite(_suite(tmp_path, failure=FOREVER))
    env = make("browser", screenshot=False, step_timeout_s=60)
    try:
        with pytest.raises(TaskError) as e:
            env.reset(task, seed=0)
    finally:
        env.close()
    assert str(e.value).startswith("task hang/t: its failure check ((() => { while (true)")
    assert "did not return within 5 s" in str(e.value)


@pytest.mark.browser
@pytest.mark.timeout(240)
@pytest.mark.parametrize("worker", ["serial", "subprocess"])
def test_a_run_on_a_hanging_check_stops_in_one_line(worker, tmp_path, capsys) -> None:
    suite = _suite(tmp_path, success=FOREVER)
    r = cli(
        capsys, "eval", "--out", tmp_path / "run", f"tasks.train={suite}", "agent.kind=random",
        "env.name=browser", "env.options={screenshot: false}", f"env.worker={worker}",
        "env.num_envs=1", "eval.n_tasks=1", "logging.tensorboard=false",
    )  # fmt: skip
    assert "task hang/t: its success check" in r.one_line()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["step", "reset"])
def test_serial_workers_enforce_the_timeouts(where) -> None:
    """A synthetic device that hangs in a step (or a reset) under the in-process serial
    worker: the command is given up at its timeout, the episode ends truncated naming it,
    and the device is started again."""
    faults = {"hang": 1.0, "hang_s": 3600.0, "on_reset": where == "reset"}
    spec = EnvSpec("synthetic/steps", {"render": False, "faults": faults})
    steps = [Task("synthetic/steps", max_steps=10, env="synthetic")]
    config = SupervisorConfig(
        step_timeout=0.3, reset_timeout=0.3, backoff_s=0.01, max_restarts=None,
        max_restarts_per_minute=10_000,
    )  # fmt: skip
    with EnvPool(spec, 1, steps, supervision=config, worker="serial") as pool:
        if where == "step":
            (r,) = pool.recv(timeout=10)
            pool.send([Action.tap(0.5, 0.5)], [0])
            (r,) = pool.recv(timeout=10)
            assert r.trajectory.truncation_cause == "step timed out after 0.3s"
        else:  # every reset hangs: the instance is given up after its reset attempts
            (r,) = pool.recv(timeout=10)
            assert r.trajectory.truncation_cause.endswith("reset timed out after 0.3s")
            assert r.trajectory.steps == [] and pool.stats()["restarts"] >= 2
