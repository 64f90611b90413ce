"""The training loop's behaviour is kept: every shipped setup (DigiRL and Filtered BC, `paper`,
`tuned`, `pretrained`) and every shipped league config, rebuilt from its config and run on a
fixed dataset, acts, scores and updates as recorded in ``tests/behaviour/fixtures/`` (within
1e-6; see `tests/behaviour/__init__.py`). A mismatch names the setup, the quantity and how far
it moved. After a deliberate change, re-record with ``python -m tests.behaviour.record NAME``
and say in the commit which change moved which numbers."""

from __future__ import annotations

import pytest
from behaviour.builders import SETUPS, record_setup
from behaviour.league import LEAGUES, record_league
from behaviour.record import load_fixture, without_meta
from behaviour.summary import differences


def _check(name: str, got: dict) -> None:
    fixture = load_fixture(name)
    diffs = differences(got, without_meta(fixture), path=name)
    where = f"recorded at {fixture['commit'][:12]}"
    assert not diffs, f"{name} moved ({where}):\n" + "\n".join(diffs)


@pytest.mark.parametrize("name", list(SETUPS))
def test_setup_acts_scores_and_updates_as_recorded(name: str) -> None:
    _check(name, record_setup(name))


@pytest.mark.parametrize("name", list(LEAGUES))
def test_league_assigns_learns_and_decides_as_recorded(name: str) -> None:
    _check(name, record_league(name))


def test_a_moved_number_is_named_with_its_setup_and_size() -> None:
    want = {"update": {"deltas": {"actor.w": [1.0, 2.0, 3.0]}}, "act": {"greedy": ["a"]}}
    got = {"update": {"deltas": {"actor.w": [1.0, 2.5, 3.0 + 1e-9]}}, "act": {"greedy": ["b"]}}
    diffs = differences(got, want, path="digirl-paper")
    assert diffs == [
        "digirl-paper.act.greedy[0]: 'b' != recorded 'a'",
        "digirl-paper.update.deltas.actor.w[1]: 2.5 != recorded 2.0 (moved by +0.5)",
    ]
