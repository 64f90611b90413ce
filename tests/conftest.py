"""Makes the benchmark-only code (``benchmarks/``: the harness, the MiniWoB++ oracle and the
official-env harness) importable by tests, by the names benchmark scripts use, and keeps the
sealed-test ledger of benchmarks run by tests apart from the committed one."""

import sys
from pathlib import Path

import pytest

BENCHMARKS = str(Path(__file__).resolve().parents[1] / "benchmarks")
if BENCHMARKS not in sys.path:
    sys.path.append(BENCHMARKS)


@pytest.fixture(autouse=True)
def _sealed_test_ledger(tmp_path, monkeypatch):
    """Benchmarks run by tests count their test evaluations in a ledger of their own."""
    try:
        import harness.sealed
    except ImportError:  # a test that never imports the harness
        return
    monkeypatch.setattr(harness.sealed, "LEDGER", tmp_path / "test-evaluations.jsonl")
