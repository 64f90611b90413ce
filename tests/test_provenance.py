"""The dirty flag and code hash of a run's provenance, on a real git checkout."""

from __future__ import annotations

import subprocess
from pathlib import Path

from devicerl.runtime.runs.provenance import UNKNOWN, checkout, provenance, uncommitted


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def test_result_files_are_not_code_but_new_source_files_are(tmp_path: Path) -> None:
    (tmp_path / "devicerl").mkdir()
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "devicerl" / "a.py").write_text("x = 1\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "c")
    assert uncommitted(tmp_path) == (False, None)

    (tmp_path / "benchmarks" / "results" / "learning.json").write_text("{}")
    assert uncommitted(tmp_path) == (False, None)  # a benchmark wrote its results

    (tmp_path / "devicerl" / "b.py").write_text("y = 2\n")
    dirty, untracked = uncommitted(tmp_path)
    assert dirty and untracked
    (tmp_path / "devicerl" / "b.py").write_text("y = 3\n")
    assert uncommitted(tmp_path)[1] != untracked  # the new file's content is hashed

    (tmp_path / "devicerl" / "b.py").unlink()
    (tmp_path / "devicerl" / "a.py").write_text("x = 2\n")
    dirty, edited = uncommitted(tmp_path)
    assert dirty and edited not in (None, untracked)


def test_outside_a_checkout_nothing_is_claimed(tmp_path: Path) -> None:
    assert uncommitted(tmp_path) == (None, None)


def test_the_commit_is_the_checkout_the_package_lies_in(tmp_path: Path) -> None:
    (tmp_path / "devicerl").mkdir()
    installed = tmp_path / ".venv" / "lib" / "site-packages" / "devicerl"
    installed.mkdir(parents=True)
    assert checkout(tmp_path / "devicerl") is None  # not a checkout
    _git(tmp_path, "init", "-q")
    assert checkout(tmp_path / "devicerl") == tmp_path.resolve()
    assert checkout(installed) is None  # installed inside a checkout: not that checkout's code
    assert provenance()["git_commit"] != UNKNOWN  # the tests run from a checkout
