"""The sealed test: each fresh evaluation of a suite's test instances for a setup is counted
in a ledger, and the count is printed with the result."""

from __future__ import annotations

import harness.sealed as sealed
from harness.report import RunResult, write_report


def test_each_fresh_test_evaluation_is_counted(tmp_path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    prov = {"git_commit": "abc"}
    assert sealed.test_evaluations("dev16", "tuned", ledger) == 0
    assert sealed.record_test_evaluation("dev16", "tuned", "cmd", prov, ledger) == 1
    assert sealed.record_test_evaluation("dev16", "paper", "cmd", prov, ledger) == 1
    assert sealed.record_test_evaluation("dev16", "tuned", "cmd", prov, ledger) == 2
    assert sealed.test_evaluations("unseen", "tuned", ledger) == 0


def test_the_count_is_printed_beside_the_result(tmp_path) -> None:
    runs = [RunResult("digirl", 0, 0.5, 10, 100, 1.0), RunResult("random", 0, 0.1, 10, 0, 1.0)]
    report = write_report(
        tmp_path, runs, setup="tuned", suite="dev16", split="test", budget=100, test_evals=3
    )
    assert report["result"].startswith("RESULT digirl=0.500 random=0.100")
    assert report["result"].endswith("setup=tuned suite=dev16 split=test test_evals=3")
