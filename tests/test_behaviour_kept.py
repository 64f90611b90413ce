"""The training loop's behaviour is kept: every shipped setup (DigiRL and Filtered BC, `paper`,
`tuned`, `pretrained`) and every shipped league config, rebuilt from its config and run on a
fixed dataset, acts, scores and updates as recorded in ``tests/behaviour/fixtures/`` (within
1e-6; see `tests/behaviour/README.md`). A mismatch names the setup, the quantity and how far
it moved.

The fixtures were recorded with CPU-independent numerics (`behaviour.record.PORTABLE_NUMERICS`)
from the code as it stood before ``runtime/`` was split into rooms; every refactor since is
checked against them, and the test records in the same child-process settings.
"""

from __future__ import annotations

import pytest
from behaviour.builders import SETUPS
from behaviour.league import LEAGUES
from behaviour.record import load_fixture, names, record_portably, without_meta
from behaviour.summary import differences


def _check(name: str, got: dict) -> None:
    fixture = load_fixture(name)
    want = without_meta(fixture)
    metrics = got.get("update", {}).get("metrics") or got.get("learn", {}).get("metrics") or {}
    skip = want.get("update", {}).get("metrics") or want.get("learn", {}).get("metrics") or {}
    for key in [k for k in metrics if k not in skip]:  # new metric names: not compared
        metrics.pop(key)
    diffs = differences(got, want, path=name)
    where = f"recorded at {fixture['commit'][:12]}"
    assert not diffs, f"{name} moved ({where}):\n" + "\n".join(diffs)


@pytest.fixture(scope="module")
def records() -> dict[str, dict]:
    """Every setup and league recorded once, in one child process with CPU-independent
    numerics (`behaviour.record.PORTABLE_NUMERICS`), as the fixtures were."""
    return record_portably(names())


@pytest.mark.xdist_group("behaviour")
@pytest.mark.parametrize("name", list(SETUPS))
def test_setup_acts_scores_and_updates_as_recorded(name: str, records) -> None:
    _check(name, records[name])


@pytest.mark.xdist_group("behaviour")
@pytest.mark.parametrize("name", list(LEAGUES))
def test_league_assigns_learns_and_decides_as_recorded(name: str, records) -> None:
    _check(name, records[name])


def test_a_moved_number_is_named_with_its_setup_and_size() -> None:
    want = {"update": {"deltas": {"actor.w": [1.0, 2.0, 3.0]}}, "act": {"greedy": ["a"]}}
    got = {"update": {"deltas": {"actor.w": [1.0, 2.5, 3.0 + 1e-9]}}, "act": {"greedy": ["b"]}}
    diffs = differences(got, want, path="digirl-paper")
    assert diffs == [
        "digirl-paper.act.greedy[0]: 'b' != recorded 'a'",
        "digirl-paper.update.deltas.actor.w[1]: 2.5 != recorded 2.0 (moved by +0.5)",
    ]
