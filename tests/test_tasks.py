import os
from pathlib import Path

import pytest

from devicerl.errors import TaskError
from devicerl.tasks import Task, TaskSampler, resolve
from devicerl.tasks.aitw import load_instruction_list, overlap

AITW = os.environ.get(
    "DEVICERL_AITW_DIR", str(Path(__file__).resolve().parents[2] / "shared" / "data" / "aitw")
)


def test_resolve_suite_glob_and_list() -> None:
    assert [t.name for t in resolve("synthetic")] == [
        "synthetic/tap",
        "synthetic/type",
        "synthetic/steps",
        "synthetic/answer",
    ]
    assert [t.name for t in resolve("synthetic/t*")] == ["synthetic/tap", "synthetic/type"]
    assert len(resolve("synthetic/tap,synthetic/tap,synthetic/steps")) == 2
    with pytest.raises(TaskError, match="unknown task or suite"):
        resolve("nope/x")
    with pytest.raises(TaskError, match="matches"):
        resolve("synthetic/zzz*")


def test_samplers_are_seeded_and_sequential_stops() -> None:
    tasks = [Task(f"x/{i}") for i in range(5)]
    a = [i.task.name for i, _ in zip(TaskSampler(tasks, seed=1), range(20))]
    b = [i.task.name for i, _ in zip(TaskSampler(tasks, seed=1), range(20))]
    assert a == b
    seq = TaskSampler(tasks, mode="sequential", cycle=False)
    assert [i.task.name for i in seq] == [t.name for t in tasks]
    assert seq.next() is None and seq.exhausted
    s = TaskSampler(tasks, seed=3)
    s.next()
    state = s.state_dict()
    x = [s.next() for _ in range(3)]
    s.load_state_dict(state)
    assert [s.next() for _ in range(3)] == x
    assert TaskSampler(tasks, max_steps=3).tasks[0].max_steps == 3


def test_instruction_lists_and_overlap(tmp_path) -> None:
    p = tmp_path / "general_train.txt"
    p.write_text("Open settings\n\nWhat's the news in Chile?\n")
    tasks = load_instruction_list(p)
    assert [t.instruction for t in tasks] == ["Open settings", "What's the news in Chile?"]
    assert tasks[0].name == "aitw/general_train/0000" and tasks[0].max_steps == 10
    q = tmp_path / "general_test.txt"
    q.write_text("open  SETTINGS\nSomething new\n")
    assert overlap(tasks, load_instruction_list(q)) == ["open  SETTINGS"]
    with pytest.raises(TaskError, match="cannot read"):
        load_instruction_list(tmp_path / "missing.txt")


def test_reference_lists_overlap() -> None:
    if not os.path.exists(f"{AITW}/general_test.txt"):
        pytest.skip("AitW lists not present on this machine")
    train = resolve(f"{AITW}/general_train.txt")
    test = resolve(f"{AITW}/general_test.txt")
    assert len(test) == 432 and len(overlap(train, test)) == 432
