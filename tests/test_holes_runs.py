"""Rule: runs are never overwritten by any verb (demo, collect, eval, import, view, judge-eval,
train), outputs are checked before any work, and rejected input writes nothing, so the retry
with the same ``--out`` works."""

from __future__ import annotations

import shutil

import pytest
import torch
from _holes import SYN, cli, episodes, snapshot

from devicerl.runtime.runs.folder import RunDir


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A finished training run (config, store, metrics, checkpoint, agent)."""
    from devicerl.cli.main import main

    run = tmp_path_factory.mktemp("trained") / "run"
    argv = ["train", "--out", str(run), *SYN, "env_steps=20", "trajectories_per_iter=2"]
    assert main([*argv, "max_iterations=1"]) == 0
    return run


@pytest.fixture()
def run(trained, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(trained, copy)
    return copy


def test_demo_never_writes_into_a_training_run(run, capsys) -> None:
    before = snapshot(run)
    refused = (
        f"devicerl demo: error: run folder {run} already exists: start over with --overwrite "
        "(deletes it), or choose another --out"
    )
    r = cli(capsys, "demo", "--synthetic", "--episodes", "2", "--out", run)
    assert r.one_line() == refused
    r = cli(capsys, "demo", "--budget", "10", "--out", run)
    assert r.one_line() == refused
    assert snapshot(run) == before


def test_demo_refuses_a_folder_of_other_files(tmp_path, capsys) -> None:
    (tmp_path / "thesis").mkdir()
    (tmp_path / "thesis" / "chapter1.tex").write_text("months of work")
    r = cli(capsys, "demo", "--budget", "10", "--out", tmp_path / "thesis")
    assert r.one_line().endswith(
        "already exists: start over with --overwrite (deletes it), or choose another --out"
    )
    r = cli(capsys, "demo", "--budget", "10", "--overwrite", "--out", tmp_path / "thesis")
    assert r.one_line().endswith("is not a run folder (no config.yaml); --overwrite refuses it")
    assert (tmp_path / "thesis" / "chapter1.tex").read_text() == "months of work"


@pytest.mark.parametrize("verb", ["eval", "collect"])
def test_eval_and_collect_refuse_an_existing_run(verb, run, capsys) -> None:
    before = snapshot(run)
    r = cli(capsys, verb, "--out", run, *SYN, "env_steps=4", "eval.n_tasks=1")
    assert r.one_line() == (
        f"devicerl {verb}: error: run folder {run} already exists: start over with --overwrite "
        "(deletes it), or choose another --out"
    )
    assert snapshot(run) == before


def test_import_adds_only_to_an_earlier_import(run, tmp_path, capsys) -> None:
    data = tmp_path / "d.pt"
    torch.save([[_step()] * 2], data)
    before = snapshot(run)
    r = cli(capsys, "import-digirl", data, "--out", run)
    assert r.one_line() == (
        f"devicerl import-digirl: error: --out {run} holds agent: it is not an earlier import "
        "(imports add only to a folder made by import-digirl); choose a new folder"
    )
    assert snapshot(run) == before
    imp = tmp_path / "imp"
    assert cli(capsys, "import-digirl", data, "--out", imp).code == 0
    other = tmp_path / "e.pt"
    torch.save([[_step("open mail")] * 3], other)
    r = cli(capsys, "import-digirl", other, "--out", imp)
    assert r.code == 0 and "imported 1 trajectories (3 steps" in r.out
    assert len(RunDir(imp).store().read_all(screenshots=False)) == 2


def _step(task: str = "open settings") -> dict:
    return {
        "observation": f"Goal: {task}</s>",
        "task": task,
        "reward": 0.0,
        "done": False,
        "action": 'Action Decision: "action_type": "PRESS_HOME"',
    }


def test_view_and_judge_eval_never_write_over_a_run(run, capsys) -> None:
    before = snapshot(run)
    r = cli(capsys, "view", run, "--out", run)
    assert "holds RUN_DIR's store" in r.one_line()  # and then holds files view did not write
    r = cli(capsys, "judge-eval", run, "--json", run / "config.yaml")
    assert r.one_line() == (
        f"devicerl judge-eval: error: --json {run / 'config.yaml'} exists and is not a "
        "judge-eval report: choose a new file"
    )
    assert snapshot(run) == before


@pytest.mark.parametrize(
    "data,line",
    [
        ("empty", "offline_data: {d}/empty holds no trajectories"),
        (
            "junk.pt",
            "offline_data: {d}/junk.pt is not a torch file (DigiRL trajectories are saved with "
            "torch.save)",
        ),
    ],
)
def test_unusable_offline_data_writes_nothing_and_the_retry_works(
    data, line, tmp_path, capsys
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "junk.pt").write_bytes(b"not a torch file")
    out = tmp_path / "out"
    argv = ["train", "--out", out, *SYN, "mode=offline", "offline_iterations=1"]
    before = snapshot(tmp_path)
    r = cli(capsys, *argv, f"offline_data={tmp_path / data}")
    assert r.one_line() == f"devicerl train: error: {line.format(d=tmp_path)}"
    assert snapshot(tmp_path) == before
    store = tmp_path / "good"
    with RunDir(store).create().writer() as w:
        w.extend(episodes(2, screenshots=False))
    r = cli(capsys, *argv, f"offline_data={store}")
    assert r.code == 0, r.err  # the same --out: nothing was left to refuse


def test_input_refused_after_the_run_started_leaves_no_folder(tmp_path, capsys) -> None:
    """A torch file that looks right but holds no trajectories is found out only when the
    offline phase reads it; the run folder made for it goes."""
    data = tmp_path / "wrong.pt"
    torch.save({"not": "a list"}, data)
    out = tmp_path / "out"
    r = cli(capsys, "train", "--out", out, *SYN, "mode=offline", f"offline_data={data}")
    assert "expected a list of trajectories" in r.one_line()
    assert not out.exists()


@pytest.mark.parametrize(
    "argv,line",
    [
        (
            ["train", "--out", "{d}/" + "x" * 300, *SYN],
            "run folder: the name xxxxxxxxxxxxxxxxxxxxx... (300 bytes) is longer than the 255 a "
            "file system takes",
        ),
        (
            ["train", "--out", "{d}/file.txt/run", *SYN],
            "run folder {d}/file.txt/run: {d}/file.txt is not a folder",
        ),
        (["train", "--out", "/proc/devicerl-run", *SYN], "run folder /proc/devicerl-run: folder"),
        (["view", "{d}/store", "--out", "{d}/file.txt/r"], "report folder {d}/file.txt/r"),
        (["import-digirl", "{d}/a.pt", "--out", "/proc/imp"], "--out /proc/imp: folder /proc"),
        (["demo", "--synthetic", "--out", "{d}/file.txt/d"], "run folder {d}/file.txt/d"),
        (["demo", "--out", "{d}/file.txt/d"], "run folder {d}/file.txt/d: {d}/file.txt is not a"),
        (["judge-eval", "{d}/store", "--json", "{d}"], "--json {d} is a folder, not a file"),
        (["judge-eval", "{d}/store", "--json", "/proc/r.json"], "--json /proc/r.json: folder"),
    ],
)
def test_outputs_the_system_refuses_are_one_line_before_any_work(
    argv, line, tmp_path, capsys
) -> None:
    (tmp_path / "file.txt").write_text("x")
    with RunDir(tmp_path / "store").create().writer() as w:
        w.extend(episodes(1, screenshots=False))
    torch.save([[_step()]], tmp_path / "a.pt")
    before = snapshot(tmp_path)
    r = cli(capsys, *[a.replace("{d}", str(tmp_path)) for a in argv])
    assert line.format(d=tmp_path) in r.one_line()
    assert snapshot(tmp_path) == before


def test_resume_names_a_saved_option_this_version_does_not_know(run, capsys) -> None:
    config = run / "config.yaml"
    config.write_text(config.read_text() + "tuning_switch: 1\n")
    before = snapshot(run)
    r = cli(capsys, "train", "--resume", run, "max_iterations=2")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert "unknown config key 'tuning_switch'" in r.err and "delete that line" in r.err
    assert snapshot(run) == before
