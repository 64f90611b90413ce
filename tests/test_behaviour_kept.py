"""The training loop's behaviour is kept: every shipped setup (DigiRL and Filtered BC, `paper`,
`tuned`, `pretrained`) and every shipped league config, rebuilt from its config and run on a
fixed dataset, acts, scores and updates as recorded in ``tests/behaviour/fixtures/`` (within
1e-6; see `tests/behaviour/README.md`). A mismatch names the setup, the quantity and how far
it moved.

The fixtures were recorded before the training loop became parts. `deliberate` applies, to the
recorded numbers, the changes made on purpose since, and nothing else:

1. ``skip_noops`` is a selection step (it was ``actor.skip_noops``): the no-op steps it drops
   are no longer handed to the actor's regression (which used to drop them itself), so the
   recorded selection of a setup that lists it loses exactly its no-op steps, and the
   selection statistics that count imitated steps (``kept_steps``, ``step_filter_kept_frac``,
   ``kept_steps_failed_frac``, ``success_steps_dropped_frac``) now count after it; they are
   not compared there. The parameter deltas, which the dropped steps never reached, must
   still match.
2. Filtered BC logs the selection statistics DigiRL logs (new metric names, not compared).
3. PBT's hyperparameter ``explore`` (the small agent's exploration floor) is named ``epsilon``.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from behaviour.builders import SETUPS, dataset, load_setup, record_setup
from behaviour.league import LEAGUES, league_dataset, load_league_config, record_league
from behaviour.record import load_fixture, without_meta
from behaviour.summary import differences

#: Selection statistics that count the steps the actor imitates (after ``skip_noops`` now).
COUNTED_AFTER_NOOPS = (
    "train/kept_steps",
    "train/step_filter_kept_frac",
    "train/kept_steps_failed_frac",
    "train/success_steps_dropped_frac",
)


def _without_noops(update: dict[str, Any], data: list[Any]) -> None:
    update["selection"] = [
        row for row in update["selection"] if not data[int(row[0])].is_noop(int(row[1]))
    ]


def _drop_counts(metrics: dict[str, Any], prefix: str = "") -> None:
    for key in COUNTED_AFTER_NOOPS:
        metrics.pop(prefix + key, None)


def _skips_noops(cfg: Any) -> bool:
    algo = cfg.filtered_bc if cfg.algo == "filtered_bc" else cfg.digirl
    return "skip_noops" in algo.selection


def deliberate(name: str, recorded: dict[str, Any]) -> dict[str, Any]:
    """The recorded numbers with the deliberate changes of the module doc applied."""
    want = copy.deepcopy(recorded)
    if name in SETUPS and _skips_noops(load_setup(name)):
        _without_noops(want["update"], dataset())
        _drop_counts(want["update"]["metrics"])
    if name in LEAGUES:
        cfg = load_league_config(name)
        learn = want.get("learn")
        if learn is not None:
            data = league_dataset(cfg)
            for policy, rec in learn["policies"].items():
                spec = cfg.policies.get(policy)
                if spec is not None and _skips_noops(spec):
                    _without_noops(rec, data)
                    _drop_counts(learn["metrics"], f"policy/{policy}/")
        want["decide"] = _renamed(want["decide"], "explore", "epsilon")
    return want


def _renamed(x: Any, old: str, new: str) -> Any:
    """``x`` with every mapping key ``old`` renamed ``new`` (nested)."""
    if isinstance(x, dict):
        return {(new if k == old else k): _renamed(v, old, new) for k, v in x.items()}
    if isinstance(x, list):
        return [_renamed(v, old, new) for v in x]
    return x


def _check(name: str, got: dict) -> None:
    fixture = load_fixture(name)
    want = deliberate(name, without_meta(fixture))
    metrics = got.get("update", {}).get("metrics") or got.get("learn", {}).get("metrics") or {}
    skip = want.get("update", {}).get("metrics") or want.get("learn", {}).get("metrics") or {}
    for key in [k for k in metrics if k not in skip]:  # new metric names: not compared
        metrics.pop(key)
    diffs = differences(got, want, path=name)
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
