"""Makes the benchmark-only code (``benchmarks/``: the harness, the MiniWoB++ oracle and the
official-env harness) importable by tests, by the names benchmark scripts use, keeps the
sealed-test ledger of benchmarks run by tests apart from the committed one, and shortens the
chat client's retry waits."""

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


@pytest.fixture(autouse=True)
def _short_chat_retries(monkeypatch):
    """The chat client's retries wait 10 ms to 50 ms here (its 1 s doubling to 30 s is for real
    servers); every client a test builds, directly or inside an agent or a judge, has them."""
    from devicerl.clients.chat import ChatClient

    monkeypatch.setattr(ChatClient, "backoff_s", 0.01)
    monkeypatch.setattr(ChatClient, "backoff_max_s", 0.05)
