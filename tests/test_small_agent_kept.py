"""Saved small agents act and score as they did when the fixture was recorded: the committed
web-skills agents (``benchmarks/agents/``) and two fresh seeded agents (whose weights pin the
order the network's parts are built in), on observations from real Chromium episodes
(``tests/small_kept/record.py``). Log-probs (with the floor, without it, at a raised floor) and
entropies within 1e-4 (plus 1e-6 relative, for the large values of impossible choices): float32
sums come out differently on another CPU (up to 3e-5 seen between two machines of this kind, on
the trained agents' log-probs of 30-180), while a change in what the agent computes moves them
by far more; greedy and seeded sampled actions, their log-probs and extras as recorded."""

from __future__ import annotations

import json

import pytest
import torch
from small_kept import kept

pytestmark = pytest.mark.usefixtures("one_torch_thread")
#: How far a value may move: float32 sums differ between CPUs (see the module doc).
TOLERANCE = 1e-4


def _load(name: str) -> dict:
    return json.loads((kept.FIXTURES / f"{name}.json").read_text())


def _close(got: list[float], want: list[float], what: str) -> None:
    g, w = torch.tensor(got, dtype=torch.float64), torch.tensor(want, dtype=torch.float64)
    assert g.shape == w.shape, what
    far = (g - w).abs() > TOLERANCE + 1e-6 * w.abs()
    assert not far.any(), f"{what}: {int(far.sum())} moved, first at {int(far.nonzero()[0])}"


@pytest.mark.parametrize("name", list(kept.AGENTS))
def test_a_saved_agent_acts_and_scores_as_recorded(name: str) -> None:
    set_name, _ = kept.AGENTS[name]
    data = _load(f"observations-{set_name}")
    observations = [kept.observation(d) for d in data["observations"]]
    pairs = [(i, kept.Action.from_dict(a)) for i, a in data["pairs"]]
    got, want = kept.what_it_makes(kept.build(name), observations, pairs), _load(name)
    for key in ("log_prob", "log_prob_no_floor", "log_prob_raised", "entropy"):
        _close(got[key], want[key], f"{name}.{key}")
    for key in ("greedy", "sampled", "sampled_raised"):
        assert got[key]["actions"] == want[key]["actions"], f"{name}.{key}.actions"
        assert got[key]["extras"] == want[key]["extras"], f"{name}.{key}.extras"
        _close(got[key]["log_probs"], want[key]["log_probs"], f"{name}.{key}.log_probs")
