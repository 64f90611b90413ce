"""Rule: imports keep every trajectory and never guess: ids come from the file's content, the
count printed is the count stored, and a value DigiRL never writes (a NaN or out-of-range
reward, a flag that is an array or a string, a task that is None) is refused in one line naming
the file, the trajectory and the step, with nothing written."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from _holes import cli, snapshot

from devicerl.runtime.runs.folder import RunDir


def step(task: str = "open settings", **values) -> dict:
    d = {
        "observation": f"Previous Actions: Goal: {task}</s>",
        "next_observation": f"Previous Actions: ... Goal: {task}</s>",
        "image_path": "/nfs/x_1.png",
        "task": task,
        "reward": 0.0,
        "done": False,
        "action": 'Action Decision: "action_type": "PRESS_HOME"',
        "mc_return": 0.0,
        "trajectory_reward": 0.0,
    }
    d.update(values)
    return d


def stored(folder) -> int:
    return len(RunDir(folder).store().read_all(screenshots=False))


def test_files_with_the_same_name_keep_every_trajectory(tmp_path, capsys) -> None:
    (tmp_path / "siteA").mkdir()
    (tmp_path / "siteB").mkdir()
    a, b = tmp_path / "siteA" / "trajectories.pt", tmp_path / "siteB" / "trajectories.pt"
    torch.save([[step("a1")], [step("a2")], [step("a3", reward=1.0)]], a)
    torch.save([[step("b1")], [step("b2")]], b)
    out = tmp_path / "imp"
    r = cli(capsys, "import-digirl", a, b, "--out", out)
    assert r.code == 0, r.err
    assert r.out.startswith("imported 5 trajectories (5 steps, success rate 20.0%);")
    assert stored(out) == 5
    # the same content again, under another name: nothing new, and the line says so
    copy = tmp_path / "copy.pt"
    copy.write_bytes(b.read_bytes())
    r = cli(capsys, "import-digirl", copy, "--out", out)
    assert r.out.startswith("imported 0 trajectories (0 steps, success rate 0.0%); 2 already in")
    assert stored(out) == 5
    r = cli(capsys, "import-digirl", a, a, "--out", tmp_path / "twice")
    assert r.out.startswith("imported 3 trajectories") and "3 already in the store" in r.out
    assert stored(tmp_path / "twice") == 3


BAD_VALUES = [
    ({"reward": float("nan")}, "step 1: reward nan is not a finite number"),
    ({"reward": np.float32("inf")}, "step 1: reward inf is not a finite number"),
    ({"reward": 7.0}, "step 1: reward 7 is outside [-1, 1]"),
    ({"trajectory_reward": -3}, "step 1: trajectory_reward -3 is outside [-1, 1]"),
    ({"mc_return": float("-inf")}, "step 1: mc_return -inf is not a finite number"),
    ({"reward": "1"}, "step 1: reward is a str, not a number"),
    ({"done": np.array([True, False])}, "step 1: done is an array of shape (2,), not a number"),
    ({"done": "False"}, "step 1: done is a str, not a number"),
    ({"done": 2}, "step 1: done 2 is not a flag (true/false, 0/1)"),
    ({"task": None}, "step 1: task is None, not text"),
    ({"action": None}, "step 1: action is None, not text"),
    ({"observation": 5}, "step 1: observation is an int, not text"),
]


@pytest.mark.parametrize("values,why", BAD_VALUES, ids=[w.split(": ")[1] for _, w in BAD_VALUES])
def test_values_digirl_never_writes_are_refused_by_file_and_trajectory(
    values, why, tmp_path, capsys
) -> None:
    path = tmp_path / "data.pt"
    torch.save([[step(), step()], [step(), step(**values)]], path)
    before = snapshot(tmp_path)
    r = cli(capsys, "import-digirl", path, "--out", tmp_path / "imp")
    assert r.one_line() == f"devicerl import-digirl: error: {path}: trajectory 1: {why}"
    assert snapshot(tmp_path) == before


def test_a_task_that_is_none_never_becomes_text(tmp_path, capsys) -> None:
    path = tmp_path / "data.pt"
    torch.save([[step(task=None)]], path)
    r = cli(capsys, "import-digirl", path, "--out", tmp_path / "imp")
    assert r.one_line() == (
        f"devicerl import-digirl: error: {path}: trajectory 0: step 0: task is None, not text"
    )
    torch.save([[step(observation=None, next_observation=None)]], path)
    assert cli(capsys, "import-digirl", path, "--out", tmp_path / "imp").code == 0
    (t,) = RunDir(tmp_path / "imp").store().read_all(screenshots=False)
    assert t.steps[0].observation.extras["prompt"] == "" and "None" not in t.instruction


def test_an_image_root_holding_a_fifo_is_not_a_hang(tmp_path, capsys) -> None:
    root = tmp_path / "images"
    root.mkdir()
    os.mkfifo(root / "x_1.png")  # named like the screenshot the file points at
    path = tmp_path / "data.pt"
    torch.save([[step()]], path)
    r = cli(capsys, "import-digirl", path, "--out", tmp_path / "imp", f"image_root={root}")
    assert r.code == 0 and "screenshots found 0, missing 2" in r.out
    r = cli(capsys, "import-digirl", path, "--out", tmp_path / "imp2", f"image_root={path}")
    assert r.one_line().endswith(f"image_root: {path} is not a folder")
