"""The train / unseen split of Synapse's 104 MiniWoB++ tasks is what its seeded, stratified
rule gives, keeps every development task in train, and never changes by hand."""

from __future__ import annotations

from collections import Counter

from devicerl.tasks import resolve, splits
from devicerl.tasks.miniwob_reach import NEEDS
from devicerl.tasks.miniwob_table3 import (
    PACKAGE_NAMES,
    TABLE3_TASKS,
    TRAIN,
    UNSEEN,
    UNSEEN_TASKS,
    stratified_split,
    stratum,
)


def _needs() -> dict[str, list[str]]:
    return {t: [k.value for k in NEEDS[PACKAGE_NAMES.get(t, t)]] for t in TABLE3_TASKS}


def _dev16() -> list[str]:
    back = {v: k for k, v in PACKAGE_NAMES.items()}
    names = [t.split("/", 1)[1] for t in splits()["miniwob-dev16"]]
    return [back.get(t, t) for t in names]


def test_the_committed_split_is_the_rules_output() -> None:
    train, unseen = stratified_split(_needs(), _dev16())
    assert (tuple(train), tuple(unseen)) == (TRAIN, UNSEEN_TASKS)
    assert len(TRAIN) == 70 and len(UNSEEN_TASKS) == UNSEEN == 34
    assert set(TRAIN) | set(UNSEEN_TASKS) == set(TABLE3_TASKS)
    assert not set(TRAIN) & set(UNSEEN_TASKS)


def test_no_development_task_is_unseen() -> None:
    assert set(_dev16()) <= set(TRAIN)


def test_every_stratum_with_free_tasks_is_in_both_parts_in_proportion() -> None:
    needs = _needs()
    free = [t for t in TABLE3_TASKS if t not in _dev16()]
    total = Counter(stratum(needs[t]) for t in free)
    unseen = Counter(stratum(needs[t]) for t in UNSEEN_TASKS)
    for s, n in total.items():
        assert abs(unseen[s] - n * UNSEEN / len(free)) < 1, (s, unseen[s], n)


def test_named_splits_resolve_to_package_tasks() -> None:
    assert len(resolve("miniwob-table3")) == 104
    assert len(resolve("miniwob-train")) == 70 and len(resolve("miniwob-unseen")) == 34
    assert "miniwob/drag-circle" in {t.name for t in resolve("miniwob-table3")}
