"""The store's index files: `TrajectoryStore.index` lists a store's episodes from the lines its
writers keep, the same table as reading every shard gives, and falls back to the shards where
a line is missing, torn or does not match."""

from __future__ import annotations

import json
import logging
import re

import pyarrow.parquet as pq
import pytest
from _runs import collect, swipe_episode, truncated_at_reset

from devicerl.data.store import INDEX_GLOB, TrajectoryStore, TrajectoryWriter
from devicerl.errors import DataError


@pytest.fixture(scope="module")
def trajectories():
    return [*collect(7), swipe_episode(), truncated_at_reset()]


def _write(folder, trajectories, flush_every=1):
    with TrajectoryWriter(folder, flush_every=flush_every) as w:
        w.extend(trajectories)
    return sorted(folder.glob("shard-*.parquet"))


def _read_index(folder):
    """The index as reading every shard gives it: the store without its index files."""
    for f in folder.glob(INDEX_GLOB):
        f.rename(folder.parent / f"{folder.name}-{f.name}.away")
    try:
        return TrajectoryStore(folder).index()
    finally:
        for f in folder.parent.glob(f"{folder.name}-*.away"):
            f.rename(folder / f.name.removeprefix(f"{folder.name}-").removesuffix(".away"))


def _garble(shard) -> None:
    """Same size, other bytes: only reading the shard (or hashing it) can tell."""
    shard.write_bytes(b"\0" * shard.stat().st_size)


def test_index_from_the_lines_equals_the_index_from_the_shards(tmp_path, trajectories) -> None:
    _write(tmp_path, trajectories[:4])
    _write(tmp_path, trajectories[4:], flush_every=3)  # a second writer, shards of 3 episodes
    assert len(list(tmp_path.glob(INDEX_GLOB))) == 2
    listed = TrajectoryStore(tmp_path).index()
    assert listed.equals(_read_index(tmp_path))  # the same rows in the same (shard) order
    steps = dict(
        zip(listed.column("episode_id").to_pylist(), listed.column("num_steps").to_pylist())
    )
    assert steps == {t.episode_id: t.length for t in trajectories}
    assert TrajectoryStore(tmp_path).index(verify=False).equals(listed)


def test_listing_reads_no_shard_and_verifying_still_finds_corruption(
    tmp_path, trajectories
) -> None:
    shards = _write(tmp_path, trajectories[:3])
    _garble(shards[1])
    ids = [t.episode_id for t in trajectories[:3]]
    # listed from the lines: the shard is not opened, its episode is listed
    assert TrajectoryStore(tmp_path).index(verify=False).column("episode_id").to_pylist() == ids
    # checked against the manifest, as reading would: refused, or left out with skip_bad
    with pytest.raises(DataError, match=f"{shards[1].name}.*sha256"):
        TrajectoryStore(tmp_path).index()
    store = TrajectoryStore(tmp_path, skip_bad=True)
    assert store.index().column("episode_id").to_pylist() == [ids[0], ids[2]]
    assert list(store.bad_shards) == [shards[1]]
    # the episodes listed without reading are checked when they are read
    got = list(store.iter_load(ids, index=store.index(verify=False)))
    assert [t.episode_id for t in got] == [ids[0], ids[2]]


def test_unlisted_torn_or_changed_shards_are_read(tmp_path, trajectories, caplog) -> None:
    old = tmp_path / "old"
    _write(old, trajectories[:3])
    for f in old.glob(INDEX_GLOB):
        f.unlink()  # an older writer's shards: no index lines
    shards = _write(old, trajectories[3:6])
    index_file = next(old.glob(INDEX_GLOB))
    lines = index_file.read_text().splitlines()
    lines[0] = lines[0][: len(lines[0]) // 2]  # torn
    lines[1] = re.sub(r'"num_steps": \d+', '"num_steps": "many"', lines[1])  # wrong type
    index_file.write_text("\n".join(lines) + "\n")
    cut = next(p for p in shards if p.name == json.loads(lines[2])["shard"])
    lost = pq.read_table(cut, columns=["episode_id"]).column("episode_id")[0].as_py()
    cut.write_bytes(cut.read_bytes()[:100])  # listed, but no longer its listed size
    store = TrajectoryStore(old, skip_bad=True)
    with caplog.at_level(logging.WARNING):
        listed = store.index(verify=False)
    # (two writers started in the same second: their shards' order is the writer ids')
    steps = dict(
        zip(listed.column("episode_id").to_pylist(), listed.column("num_steps").to_pylist())
    )
    assert steps == {t.episode_id: t.length for t in trajectories[:6] if t.episode_id != lost}
    assert list(store.bad_shards) == [cut] and "do not fit" in caplog.text


def test_compaction_and_deleted_shards_keep_the_index_right(tmp_path, trajectories) -> None:
    shards = _write(tmp_path, trajectories)
    TrajectoryStore(tmp_path).compact(max_episodes=4)
    assert len(list(tmp_path.glob("shard-*.parquet"))) < len(shards)
    listed = TrajectoryStore(tmp_path).index()  # the old shards' lines name deleted shards
    assert listed.equals(_read_index(tmp_path))
    assert sorted(listed.column("episode_id").to_pylist()) == sorted(
        t.episode_id for t in trajectories
    )  # (compaction keeps the episodes, not their order: its shards are named after it)
