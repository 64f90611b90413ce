"""`devicerl view` reads the store's index, then only the shards of the episodes it shows;
screens go to the page as stored where a browser shows them (decoded only where they must be
downscaled or are not an image format); an unreadable screen costs only itself."""

from __future__ import annotations

import re
import struct

import pyarrow as pa
import pyarrow.parquet as pq
from _runs import collect

from devicerl.data.schema import trajectories_table
from devicerl.data.store import TrajectoryStore, TrajectoryWriter
from devicerl.runtime.reports.viewer import ViewConfig, build_report


def _store(folder, trajectories, codec="webp-lossless"):
    with TrajectoryWriter(folder, codec=codec) as w:
        w.extend(trajectories)
    return sorted(folder.glob("shard-*.parquet"))


def _shown(page: str) -> list[str]:
    return re.findall(r'<section class="episode"[^>]* data-episode="([^"]+)"', page)


def test_view_reads_only_the_shards_of_the_episodes_it_shows(tmp_path) -> None:
    trajs = collect(6)
    shards = _store(tmp_path / "store", trajs)
    old = shards[1]
    old.write_bytes(b"\0" * old.stat().st_size)  # corrupt, same size: only reading tells
    newest = [t.episode_id for t in trajs[-3:]][::-1]
    report = build_report(tmp_path / "store", tmp_path / "a", ViewConfig(max_episodes=3))
    page = report.path.read_text()
    assert _shown(page) == newest and report.bad_shards == {}  # the old shard was not read
    assert report.episodes_shown == 3 and report.episodes_total == 6
    assert "3</span> of 3 episodes shown (newest first; 6 in the store)" in page
    shown = shards[4]
    shown.write_bytes(b"\0" * shown.stat().st_size)
    report = build_report(tmp_path / "store", tmp_path / "b", ViewConfig(max_episodes=3))
    page = report.path.read_text()
    assert _shown(page) == [newest[0], newest[2]] and list(report.bad_shards) == [str(shown)]
    assert "skipped" in page and shown.name in page


def test_screens_are_written_as_stored_where_they_fit(tmp_path) -> None:
    trajs = collect(2)
    shard = _store(tmp_path / "store", trajs)[0]
    stored = {
        (row["step_index"]): row["screenshot"]
        for row in pq.read_table(shard).to_pylist()
        if row["screenshot"] is not None
    }
    out = tmp_path / "report"
    build_report(tmp_path / "store", out, ViewConfig(curves=False))
    written = sorted((out / "img").iterdir())
    assert written and all(p.suffix == ".webp" for p in written)  # as stored: not decoded
    first = [p for p in written if p.name.endswith("-0.webp")]
    assert {p.read_bytes() for p in first} & {stored[0]}
    # larger than the side asked for: decoded, downscaled, JPEG
    build_report(tmp_path / "store", out, ViewConfig(curves=False, image_max_side=64))
    from PIL import Image

    written = sorted((out / "img").iterdir())
    assert written and all(p.suffix == ".jpg" for p in written)  # the .webp ones are gone
    assert all(max(Image.open(p).size) <= 64 for p in written)
    # a format no browser shows (raw pixels): decoded and written as JPEG
    _store(tmp_path / "raw", trajs, codec="raw")
    build_report(tmp_path / "raw", tmp_path / "raw-report", ViewConfig(curves=False))
    assert {p.suffix for p in (tmp_path / "raw-report" / "img").iterdir()} == {".jpg"}


def test_an_unreadable_screen_shows_its_wireframe_and_is_listed(tmp_path) -> None:
    (t,) = collect(1)
    table = trajectories_table([t], "raw")
    shots = table.column("screenshot").to_pylist()
    magic = shots[0][:8]
    shots[0] = magic + struct.pack("<III", 160, 96, 3) + b"not zstd"  # claims a size, no pixels
    table = table.set_column(
        table.schema.get_field_index("screenshot"), "screenshot", pa.array(shots, pa.binary())
    )
    TrajectoryWriter(tmp_path / "store").write_table(table)
    report = build_report(tmp_path / "store", tmp_path / "report", ViewConfig(curves=False))
    page = report.path.read_text()
    assert report.episodes_shown == 1
    assert 'class="shot wired"' in page  # drawn from its UI elements instead
    (problem,) = [k for k in report.bad_shards if "screen 0" in k]
    assert t.episode_id in problem and "skipped" in page
    assert len(TrajectoryStore(tmp_path / "store").read_all(screenshots=False)) == 1
