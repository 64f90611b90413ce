"""The sealed test: how often each suite's test instances were evaluated for each setup.

Decisions use validation instances; a setup's test instances are evaluated once it is adopted.
Every benchmark run that evaluates test instances afresh (not only reusing finished runs)
appends one row to `LEDGER` (committed beside the results), and every test result is printed
with its (suite, setup)'s count, so a result reached by evaluating test again and again shows
it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

#: One row per fresh test evaluation: suite, setup, command, commit, date.
LEDGER = Path(__file__).resolve().parents[1] / "results" / "test-evaluations.jsonl"


def test_evaluations(suite: str, setup: str, ledger: Path | None = None) -> int:
    """How many times (suite, setup)'s test instances were evaluated."""
    ledger = ledger or LEDGER
    if not ledger.exists():
        return 0
    rows = [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]
    return sum(1 for r in rows if r["suite"] == suite and r["setup"] == setup)


def record_test_evaluation(
    suite: str, setup: str, command: str, provenance: dict[str, Any], ledger: Path | None = None
) -> int:
    """Count one more evaluation of (suite, setup)'s test instances; returns the new count."""
    ledger = ledger or LEDGER
    ledger.parent.mkdir(parents=True, exist_ok=True)
    row = {
        "suite": suite,
        "setup": setup,
        "command": command,
        "commit": provenance.get("git_commit"),
        "date": time.strftime("%Y-%m-%d"),
    }
    with ledger.open("a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
    return test_evaluations(suite, setup, ledger)
