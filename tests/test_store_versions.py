"""Stores written by older versions read as their own version read them: the committed samples
under ``tests/data/stores/`` (store version 1, and version 2 as the schema was written by hand)
were written by `tests/data/stores/write.py` at the commits their ``commit.txt`` names, with
the JSON of what that version read back beside them."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
from store_samples import STORES, canonical

from devicerl.data.store import TrajectoryStore, TrajectoryWriter


def _default(f: dataclasses.Field) -> object:
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return f.default


def _same(expected: object, got: object, where: str) -> None:
    """``got`` reads as ``expected`` (the old version's reading) says; a field the old version
    did not have reads as its default."""
    if dataclasses.is_dataclass(got):
        assert isinstance(expected, dict), where
        for f in dataclasses.fields(got):
            value = getattr(got, f.name)
            if f.name in expected:
                _same(expected[f.name], value, f"{where}.{f.name}")
            else:
                assert canonical(value) == canonical(_default(f)), f"{where}.{f.name}: {value!r}"
    elif isinstance(got, list):
        assert isinstance(expected, list) and len(expected) == len(got), where
        for i, (e, g) in enumerate(zip(expected, got)):
            _same(e, g, f"{where}[{i}]")
    else:
        assert canonical(got) == expected, f"{where}: {canonical(got)!r} != {expected!r}"


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_an_older_store_reads_as_its_version_read_it(tmp_path, version) -> None:
    folder = tmp_path / "store"
    shutil.copytree(STORES / version / "store", folder)
    expected = json.loads((STORES / version / "expected.json").read_text())
    back = TrajectoryStore(folder).read_all()
    assert len(back) == len(expected) == 3
    for want, t in zip(expected, back):
        _same(want, t, f"{version}:{t.episode_id[:4]}")
    assert TrajectoryStore(folder).index().column("episode_id").to_pylist() == [
        t.episode_id for t in back
    ]


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_an_older_store_rewritten_reads_the_same(tmp_path, version) -> None:
    old = TrajectoryStore(STORES / version / "store").read_all()
    with TrajectoryWriter(tmp_path) as w:
        w.extend(old)
    again = TrajectoryStore(tmp_path).read_all()
    assert [canonical(t) for t in again] == [canonical(t) for t in old]
