"""Rule: one top-level error rule. Whatever bad input or the system causes ends as one line
naming the culprit, exit code 2, nothing written; only a bug in devicerl shows a traceback, and
the line under it says it is one."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from _holes import SYN, cli, episodes, snapshot

from devicerl.runtime.runs.folder import RunDir


@pytest.fixture()
def store(tmp_path):
    with RunDir(tmp_path / "run").create().writer() as w:
        w.extend(episodes(2, screenshots=False))
    return tmp_path / "run"


CONFIGS = {
    "latin1.yaml": ("seed: 1\n# caf\xe9\n".encode("latin-1"), "is not UTF-8 text: byte 0xe9 on line 2"),  # noqa: E501
    "dup.yaml": (b"seed: 1\nenv:\n  num_envs: 2\nseed: 3\n", "line 4, column 1: duplicate key 'seed' (first on line 1)"),  # noqa: E501
    "nested-dup.yaml": (b"env:\n  num_envs: 2\n  num_envs: 3\n", "line 3, column 3: duplicate key 'num_envs' (first on line 2)"),  # noqa: E501
    "binary.yaml": (b"\x00\x01\x02\xff", "is not UTF-8 text: byte 0xff on line 1"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("verb", ["train", "view", "judge-eval", "import-digirl"])
def test_a_config_file_that_is_not_a_yaml_mapping_is_one_line(
    verb, name, store, tmp_path, capsys
) -> None:
    data, why = CONFIGS[name]
    path = tmp_path / name
    path.write_bytes(data)
    where = {"train": ["--out", tmp_path / "out"], "view": [store], "judge-eval": [store]}
    words = where.get(verb, [tmp_path / "x.pt", "--out", tmp_path / "imp"])
    before = snapshot(tmp_path)
    r = cli(capsys, verb, *words, "--config", path)
    line = r.one_line()
    assert line.startswith(f"devicerl {verb}: error: config {path}") and line.endswith(why)
    assert snapshot(tmp_path) == before


def test_a_fifo_named_as_the_config_is_refused_without_waiting(tmp_path) -> None:
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    r = subprocess.run(
        [sys.executable, "-m", "devicerl", "train", "--config", str(fifo), "--print-config"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stderr.strip() == (
        f"devicerl train: error: config {fifo} is a FIFO, not a regular file: refused"
    )


def test_judge_eval_checks_its_json_path_before_judging(store, tmp_path, capsys) -> None:
    (tmp_path / "reports").mkdir()
    r = cli(capsys, "judge-eval", store, "--json", tmp_path / "reports")
    assert r.one_line() == (
        f"devicerl judge-eval: error: --json {tmp_path / 'reports'} is a folder, not a file"
    )
    assert "judge:" not in r.out  # refused before judging: no work lost


def test_a_system_error_is_one_line_naming_the_file(store, capsys, monkeypatch) -> None:
    import devicerl.runtime.reports.viewer as viewer

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied", "/srv/shared/report/index.html")

    monkeypatch.setattr(viewer, "build_report", refused)
    r = cli(capsys, "view", store)
    assert r.one_line() == (
        "devicerl view: error: Permission denied: /srv/shared/report/index.html"
    )


def test_only_a_bug_shows_a_traceback_and_says_so(store, capsys, monkeypatch) -> None:
    import devicerl.runtime.reports.viewer as viewer

    def bug(*args, **kwargs):
        return {}["no such key"]

    monkeypatch.setattr(viewer, "build_report", bug)
    r = cli(capsys, "view", store)
    assert r.code == 1 and "Traceback (most recent call last)" in r.err
    assert r.err.strip().splitlines()[-1] == (
        "devicerl view: internal error: this is a bug in devicerl, not in your input (please "
        "report it with the traceback above): KeyError: 'no such key'"
    )


@pytest.mark.parametrize(
    "words,line",
    [
        (["env.name=synthetic", "env.options={step_latency: .nan}"], "env.options.step_latency=nan: must be a finite number"),  # noqa: E501
        (["seed=18446744073709551616"], "seed=18446744073709551616: must be in [0, 9223372036854775807]"),  # noqa: E501
        (["actor.batch_size=1000000000"], "actor.batch_size=1000000000: must be <= replay_capacity (2000)"),  # noqa: E501
    ],
)  # fmt: skip
def test_numbers_that_would_crash_later_fail_before_the_run_folder(
    words, line, tmp_path, capsys
) -> None:
    r = cli(capsys, "train", "--out", tmp_path / "out", *SYN, *words)
    assert r.one_line() == f"devicerl train: error: {line}"
    assert not (tmp_path / "out").exists()


def test_an_allocation_the_machine_refuses_is_one_line(store, capsys, monkeypatch) -> None:
    import devicerl.runtime.reports.viewer as viewer

    def huge(*args, **kwargs):  # what torch raises for agent.small.d_model=1000000000
        raise RuntimeError(
            "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
            "memory: you tried to allocate 32768000000000 bytes. Error code 12"
        )

    monkeypatch.setattr(viewer, "build_report", huge)
    r = cli(capsys, "view", store)
    assert r.one_line() == (
        "devicerl view: error: out of memory: the input asks for more than this machine has "
        "(can't allocate memory: you tried to allocate 32768000000000 bytes. Error code 12)"
    )


def test_metrics_with_numbers_json_cannot_hold_are_skipped_not_a_crash(store, capsys) -> None:
    (store / "metrics.jsonl").write_text(
        '{"step": 1e400, "time": 0, "a/b": 1}\n{"step": 2, "time": 0, "a/b": 1e400}\n'
    )
    r = cli(capsys, "view", store)
    assert r.code == 0, r.err
    assert f"warning: skipped {store}/metrics.jsonl:1: malformed metrics line: step inf is not a " \
        "finite count" in r.out  # fmt: skip


@pytest.mark.parametrize(
    "data,why",
    [
        (b"caf\xe9\n", "is not UTF-8 text: byte 0xe9 on line 1"),
        (None, "is a FIFO, not a regular file: refused"),
    ],
)
def test_an_instruction_list_that_is_not_text_is_one_line(data, why, tmp_path, capsys) -> None:
    path = tmp_path / "general_train.txt"
    if data is None:
        os.mkfifo(path)
    else:
        path.write_bytes(data)
    r = cli(capsys, "tasks", path)
    assert r.one_line() == f"devicerl tasks: error: instruction list {path} {why}"
