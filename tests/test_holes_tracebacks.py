"""Rule: bad input is one line (exit code 2), never a traceback, on every verb. The last
tracebacks (a non-UTF-8 benchmark file, a negative CPU count) and others found by trying bad
input as a new user would: flags checked with the config's bounds vocabulary, an empty
``--out`` (which a path reads as "here"), a view of a folder that is no run."""

from __future__ import annotations

import pytest
from _holes import SYN, cli


def test_bench_lists_a_folder_holding_a_file_that_is_not_python_text(tmp_path, capsys):
    (tmp_path / "latin.py").write_bytes(b'"""Caf\xe9 benchmark."""\n')
    (tmp_path / "nul.py").write_bytes(b"x = 1\x00\n")
    (tmp_path / "fine.py").write_text('"""A fine benchmark."""\n')
    (tmp_path / "folder.py").mkdir()
    r = cli(capsys, "bench", "--dir", tmp_path)
    assert r.code == 0 and "Traceback" not in r.err, r.err
    listed = {line.split()[0]: " ".join(line.split()[1:]) for line in r.out.splitlines()[1:-1]}
    assert listed == {"fine": "A fine benchmark.", "folder": "(does not parse)",
                      "latin": "(does not parse)", "nul": "(does not parse)"}  # fmt: skip


def test_bench_refuses_a_dir_that_is_not_a_folder(tmp_path, capsys, monkeypatch) -> None:
    (tmp_path / "f.py").write_text("")
    assert "--dir" in cli(capsys, "bench", "--dir", tmp_path / "f.py").one_line()
    monkeypatch.setenv("DEVICERL_BENCHMARKS", str(tmp_path / "missing"))
    assert "$DEVICERL_BENCHMARKS" in cli(capsys, "bench").one_line()


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--local", "1", "--cpus", "-2"], "--cpus: must be in (0, 1024]"),
        (["--local", "1", "--cpus", "nan"], "--cpus: expected a finite number"),
        (["--local", "0"], "--local: must be in [1, 64]"),
        (["--local", "1", "--groups-per-node", "0"], "--groups-per-node"),
        (["--local", "1", "--for", "-1"], "--for: must be > 0"),
    ],
)
def test_cluster_up_checks_its_numbers_before_starting(argv, named, capsys) -> None:
    assert named in cli(capsys, "cluster", "up", *argv).one_line()


@pytest.mark.parametrize(
    "argv",
    [
        ["train", *SYN, "--out", ""],
        ["eval", *SYN, "--out", ""],
        ["demo", "--synthetic", "--out", ""],
        ["interpolate", "a", "b", "--alpha", "0.5", "--out", ""],
        ["import-digirl", "x.pt", "--out", ""],
        ["view", ".", "--out", ""],
    ],
)
def test_an_empty_out_is_refused_not_taken_for_here(argv, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert "empty path" in cli(capsys, *argv).one_line()
    assert list(tmp_path.iterdir()) == []


def test_view_writes_no_report_into_a_folder_that_is_no_run(tmp_path, capsys) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    assert "neither a run folder nor a trajectory store" in cli(capsys, "view", tmp_path).one_line()
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
