"""Rule: no data chooses a path. Stores, metrics and reports are data users exchange: the viewer
names every file it writes, writes only inside its report folder (never through a link),
deletes only what it wrote, escapes every id and text (attributes too), and reads only regular
files of bounded size from inside the store."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _holes import cli, episodes, png_claiming, snapshot

from devicerl.data.schema import trajectories_table
from devicerl.runtime.reports.viewer import MANIFEST
from devicerl.runtime.runs.folder import RunDir

HOSTILE_IDS = [
    "/tmp/devicerl-hostile/abs",  # an absolute path
    "a/b/c",  # separators
    "../../../escaped",  # parent folders
    '"><script>window.pwned=1</script><x a="',  # markup in an attribute
]


@pytest.fixture()
def hostile_run(tmp_path):
    """A run whose stored episode ids are paths and markup (as an exchanged store may hold)."""
    run = RunDir(tmp_path / "run").create()
    trajs = episodes(len(HOSTILE_IDS))
    for t, episode_id in zip(trajs, HOSTILE_IDS):
        t.episode_id = episode_id
    with run.writer() as w:
        w.extend(trajs)
    return run


def test_episode_ids_never_choose_where_images_go(hostile_run, tmp_path, capsys) -> None:
    outside = snapshot(tmp_path)
    r = cli(capsys, "view", hostile_run.path)
    assert r.code == 0, r.err
    report = hostile_run.report
    written = {k for k in snapshot(tmp_path) if k not in outside}
    assert written and all(k.startswith("run/report") for k in written), written
    assert not os.path.exists("/tmp/devicerl-hostile")
    images = sorted(p.name for p in (report / "img").iterdir())
    assert len(images) >= len(HOSTILE_IDS) and all("/" not in n and ".." not in n for n in images)
    listed = json.loads((report / MANIFEST).read_text())
    assert sorted(listed) == sorted(str(p.relative_to(report)) for p in report.rglob("*.*")
                                    if p.name != MANIFEST)  # fmt: skip


@pytest.mark.browser
def test_stored_markup_is_text_in_the_page_never_script(hostile_run, capsys) -> None:
    from playwright.sync_api import sync_playwright

    assert cli(capsys, "view", hostile_run.path).code == 0
    page_html = (hostile_run.report / "index.html").read_text()
    assert "<script>window.pwned" not in page_html
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=shutil.which("chromium"), args=["--headless", "--no-sandbox"]
        )
        page = browser.new_page()
        page.goto((hostile_run.report / "index.html").as_uri())
        assert page.evaluate("typeof window.pwned") == "undefined"
        ids = page.locator(".episode").evaluate_all("els => els.map(e => e.dataset.episode)")
        browser.close()
    assert sorted(ids) == sorted(HOSTILE_IDS)  # the attribute holds the id, as text


def test_the_viewer_never_deletes_or_overwrites_a_users_files(hostile_run, tmp_path, capsys):
    folder = tmp_path / "mine"
    for sub in ("img", "curves"):
        (folder / sub).mkdir(parents=True)
        (folder / sub / "holiday.jpg").write_bytes(b"precious")
    before = snapshot(folder)
    r = cli(capsys, "view", hostile_run.path, "--out", folder)
    line = r.one_line()
    assert line == (
        f"devicerl view: error: report folder {folder} holds files devicerl view did not write "
        f"(no {MANIFEST}): choose a new or empty folder with --out"
    )
    assert snapshot(folder) == before
    # its own report folder: a file a user adds there is kept, the old report's files replaced
    assert cli(capsys, "view", hostile_run.path).code == 0
    notes = hostile_run.report / "notes.txt"
    notes.write_text("mine")
    (hostile_run.report / "img" / "mine.jpg").write_bytes(b"mine too")
    first = set(json.loads((hostile_run.report / MANIFEST).read_text()))
    assert cli(capsys, "view", hostile_run.path, "max_episodes=1").code == 0
    left = {str(p.relative_to(hostile_run.report)) for p in hostile_run.report.rglob("*")}
    assert notes.read_text() == "mine" and "img/mine.jpg" in left
    now = set(json.loads((hostile_run.report / MANIFEST).read_text()))
    assert now < first and not (first - now) & left  # what the first report wrote and the
    # second did not is gone; nothing else is


def test_a_link_planted_in_a_report_is_replaced_not_followed(hostile_run, tmp_path, capsys):
    assert cli(capsys, "view", hostile_run.path).code == 0
    target = tmp_path / "bashrc"
    target.write_text("keep me")
    image = next((hostile_run.report / "img").iterdir())
    image.unlink()
    image.symlink_to(target)
    index = hostile_run.report / "index.html"
    index.unlink()
    index.symlink_to(target)
    assert cli(capsys, "view", hostile_run.path).code == 0
    assert target.read_text() == "keep me"
    assert not image.is_symlink() and not index.is_symlink()
    (hostile_run.report / "img").rename(tmp_path / "img-real")
    (hostile_run.report / "img").symlink_to(tmp_path / "img-real")
    r = cli(capsys, "view", hostile_run.path)
    assert r.one_line().endswith("img is not a folder: refused")


def test_metric_names_never_choose_curve_files(tmp_path, capsys) -> None:
    run = RunDir(tmp_path / "run").create()
    with run.writer() as w:
        w.extend(episodes(2))
    records = [{"step": s, "time": 0.0, "../../../../escaped/x": 0.5 * s} for s in range(3)]
    run.metrics_path.write_text("".join(json.dumps(r) + "\n" for r in records))
    outside = snapshot(tmp_path)
    assert cli(capsys, "view", run.path).code == 0
    written = {k for k in snapshot(tmp_path) if k not in outside}
    assert all(k.startswith("run/report") for k in written), written
    assert len(list((run.report / "curves").glob("metrics-*.png"))) == 1


def _devicerl(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    # a subprocess with a deadline: a reader that blocks fails the test instead of hanging it
    return subprocess.run(
        [sys.executable, "-m", "devicerl", *args], capture_output=True, text=True, timeout=timeout
    )


def test_special_files_and_links_in_a_store_are_refused_not_read(tmp_path) -> None:
    run = RunDir(tmp_path / "run").create()
    with run.writer() as w:
        w.extend(episodes(2))
    secret = tmp_path / "elsewhere.parquet"
    shutil.copy(next(run.trajectories.glob("shard-*.parquet")), secret)
    os.mkfifo(run.trajectories / "shard-zz-fifo.parquet")
    (run.trajectories / "shard-zz-link.parquet").symlink_to(secret)
    os.mkfifo(run.trajectories / "manifest-zz-fifo.jsonl")
    os.mkfifo(run.metrics_path)
    (run.path / "league").mkdir()
    (run.path / "league" / "table.txt").symlink_to(tmp_path / "elsewhere.parquet")
    r = _devicerl("view", str(run.path))
    assert r.returncode == 0, r.stderr
    assert "2 of 2 episodes" in r.stdout
    warned = r.stdout + r.stderr
    assert "shard-zz-fifo.parquet is not a regular file: refused" in warned
    assert f"trajectory shard {run.trajectories}/shard-zz-link.parquet leads outside" in warned
    assert "metrics file" in warned and "a FIFO, not a regular file" in warned
    assert "league table" in warned and "leads outside" in warned
    r = _devicerl("judge-eval", str(run.path))
    assert r.returncode == 0 and "skipped bad shard shard-zz-fifo.parquet" in r.stderr


def test_a_screenshot_claiming_a_huge_size_is_refused_before_decoding(tmp_path) -> None:
    run = RunDir(tmp_path / "run").create()
    table = trajectories_table(episodes(1), "png")
    shots = table.column("screenshot").to_pylist()
    shots[0] = png_claiming(100_000, 100_000)  # 10^10 pixels in ~70 bytes
    table = table.set_column(
        table.schema.get_field_index("screenshot"), "screenshot", pa.array(shots, pa.binary())
    )
    pq.write_table(table, run.trajectories / "shard-0-000000.parquet")
    r = _devicerl("view", str(run.path))
    assert r.returncode == 0, r.stderr
    assert "png image claims 100000 x 100000 pixels, more than the 16777216 allowed" in r.stdout
