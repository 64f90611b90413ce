"""Makes the benchmark-only code (``benchmarks/``: the harness, the MiniWoB++ oracle and the
official-env harness) importable by tests, by the names benchmark scripts use, keeps the
sealed-test ledger of benchmarks run by tests apart from the committed one, shortens the
chat client's retry waits, and keeps the tests that start a Ray cluster on one pytest-xdist
worker, one at a time."""

import sys
from pathlib import Path

import pytest

BENCHMARKS = str(Path(__file__).resolve().parents[1] / "benchmarks")
if BENCHMARKS not in sys.path:
    sys.path.append(BENCHMARKS)


def pytest_collection_modifyitems(config, items):
    """Under ``-n N --dist loadgroup`` the Ray tests form one group: two local Ray clusters at
    once would compete for the two cores and the memory, and the cluster tests time node loss."""
    for item in items:
        if item.get_closest_marker("ray") is not None:
            item.add_marker(pytest.mark.xdist_group("ray"))


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


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a module's tests (``pytestmark = pytest.mark.usefixtures(...)``):
    tiny models run no slower on one, and the two test workers share the machine's cores."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
