"""Content hashes on checkpoints and stores: corruption of any kind is found and survived.

Same-size byte flips (in tensor data, optimizer state, RNG state, the state file, a stored
screenshot) are detected by sha256 and fall back to the previous good checkpoint or skip the
shard, naming it; `judge-eval` reports despite a bad shard; `import-digirl` leaves nothing
half-written and reads no file outside its image root.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from _runs import collect

from devicerl.data.store import TrajectoryStore, TrajectoryWriter
from devicerl.errors import DataError
from devicerl.runtime.runs.checkpoint import CheckpointManager

FAST = [
    "env.name=synthetic",
    "env.num_envs=2",
    "env.worker=serial",
    "tasks.train=synthetic/tap",
    "logging.tensorboard=false",
    "trajectories_per_iter=4",
    "env_steps=1000000",
    "checkpoint_every=1",
    "eval.at_end=false",
    "actor.updates=2",
    "actor.batch_size=8",
    "critic.updates=1",
]


def _cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    return subprocess.run(
        [sys.executable, "-m", "devicerl", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def _flip(path: Path, offset: int) -> None:
    """Flip every bit of one byte in place: same size, different content."""
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def _tensor_data_offset(path: Path) -> int:
    """An offset inside the first tensor's data of a safetensors file (after its header)."""
    header = int.from_bytes(path.read_bytes()[:8], "little")
    return 8 + header + 3


def _save_three(root: Path) -> tuple[CheckpointManager, torch.nn.Module]:
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 32)
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(4, 64)).sum().backward()
    opt.step()
    mgr = CheckpointManager(root, keep=3)
    for i in (1, 2, 3):
        mgr.save(i, {"actor": model.state_dict()}, {"actor": opt.state_dict()}, {"i": i})
    return mgr, model


# -- checkpoints ------------------------------------------------------------------------------


def test_manifest_holds_sha256_of_every_file(tmp_path) -> None:
    _save_three(tmp_path)
    state = json.loads((tmp_path / "iter-000003" / "state.json").read_text())
    files = {p.name for p in (tmp_path / "iter-000003").iterdir()} - {"state.json"}
    assert set(state["manifest"]) == files
    for entry in state["manifest"].values():
        assert len(entry["sha256"]) == 64 and entry["size"] > 0
    assert len(state["state_sha256"]) == 64


@pytest.mark.parametrize(
    "target",
    ["actor.safetensors", "actor.optim.pt", "rng.safetensors", "state.json"],
)
def test_same_size_corruption_falls_back_with_a_warning(tmp_path, caplog, target) -> None:
    mgr, _ = _save_three(tmp_path)
    path = tmp_path / "iter-000003" / target
    size = path.stat().st_size
    if target.endswith(".safetensors"):
        _flip(path, _tensor_data_offset(path))  # tensor data, not the header
    elif target == "state.json":
        text = path.read_text()
        i = text.index('"i": 3')
        path.write_text(text[:i] + '"i": 7' + text[i + 6 :])  # still valid JSON
    else:
        _flip(path, size // 2)
    assert path.stat().st_size == size
    with caplog.at_level(logging.WARNING):
        ck = mgr.load_latest(set_aside=True)
    assert ck is not None and ck.iteration == 2
    assert f"iter-000003/{target}" in caplog.text and "sha256" in caplog.text
    assert "falling back" in caplog.text
    # the bad one is set aside, never loaded again, and `latest` names the good one
    assert [p.name for p in mgr.published()] == ["iter-000001", "iter-000002"]
    assert (tmp_path / "corrupt-iter-000003").is_dir()
    assert (tmp_path / "latest").read_text().strip() == "iter-000002"


def test_unlisted_file_in_a_checkpoint_is_refused(tmp_path) -> None:
    mgr, _ = _save_three(tmp_path)
    torch.save({"w": torch.zeros(2)}, tmp_path / "iter-000003" / "extra.optim.pt")
    with pytest.raises(DataError, match=r"extra\.optim\.pt is not in its manifest"):
        mgr.load(tmp_path / "iter-000003")


def test_resume_after_same_size_corruption_falls_back(tmp_path) -> None:
    run = tmp_path / "run"
    first = _cli("train", "--out", str(run), *FAST, "max_iterations=3")
    assert first.returncode == 0, first.stderr
    weights = run / "checkpoints" / "iter-000003" / "agent.actor.safetensors"
    data = bytearray(weights.read_bytes())
    start = _tensor_data_offset(weights) - 3
    data[start : start + 64] = np.full(16, np.nan, dtype=np.float32).tobytes()  # NaN weights
    weights.write_bytes(bytes(data))
    resumed = _cli("train", "--resume", str(run), "max_iterations=4")
    assert resumed.returncode == 0, resumed.stderr
    assert "iter-000003/agent.actor.safetensors" in resumed.stderr and "sha256" in resumed.stderr
    assert "falling back to the previous good checkpoint iter-000002" in resumed.stderr
    assert json.loads((run / "summary.json").read_text())["iteration"] == 4
    assert (run / "checkpoints" / "corrupt-iter-000003").is_dir()
    ck = CheckpointManager(run / "checkpoints").load_latest()
    assert ck is not None and ck.iteration == 4
    assert all(torch.isfinite(t).all() for t in ck.models["agent.actor"].values())


# -- stores ---------------------------------------------------------------------------------


def _store_with_three_shards(folder: Path) -> list[Path]:
    with TrajectoryWriter(folder) as w:
        for t in collect(3):
            w.append(t)
        return list(w.shards_written)


def test_same_size_corruption_of_a_shard_is_named_and_skippable(tmp_path, caplog) -> None:
    shards = _store_with_three_shards(tmp_path)
    size = shards[1].stat().st_size
    _flip(shards[1], size // 3)  # somewhere in the column data (screenshots, rows)
    assert shards[1].stat().st_size == size
    with pytest.raises(DataError, match=f"{shards[1].name}.*sha256"):
        TrajectoryStore(tmp_path).read_all()
    store = TrajectoryStore(tmp_path, skip_bad=True)
    with caplog.at_level(logging.WARNING):
        got = store.read_all()
    assert len(got) == 2 and list(store.bad_shards) == [shards[1]]
    assert shards[1].name in caplog.text
    assert len(TrajectoryStore(tmp_path, skip_bad=True).index()) == 2


def test_judge_eval_skips_bad_shards_and_still_reports(tmp_path) -> None:
    shards = _store_with_three_shards(tmp_path / "trajectories")
    _flip(shards[0], shards[0].stat().st_size // 2)
    shards[2].write_bytes(shards[2].read_bytes()[:100])  # truncated too
    report = tmp_path / "report.json"
    proc = _cli("judge-eval", str(tmp_path), "--json", str(report))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"skipped bad shard {shards[0].name}" in proc.stderr
    assert f"skipped bad shard {shards[2].name}" in proc.stderr
    data = json.loads(report.read_text())
    assert data["n"] == 1
    assert set(data["skipped_shards"]) == {shards[0].name, shards[2].name}


# -- importers --------------------------------------------------------------------------------


def _digirl_file(path: Path, image_path: str, n: int = 2) -> Path:
    steps = [
        {
            "observation": "Previous Actions: Goal: open settings</s>",
            "next_observation": "Previous Actions: ... Goal: open settings</s>",
            "image_path": image_path,
            "task": "open settings",
            "reward": 0.0,
            "done": False,
            "action": 'Action Decision: "action_type": "PRESS_HOME"',
        }
        for _ in range(n)
    ]
    torch.save([steps], path)
    return path


def test_import_refuses_paths_outside_image_root_without_echoing_them(tmp_path) -> None:
    root = tmp_path / "images"
    root.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:TOPSECRET-CONTENT\n")
    traversal = "../" * 12 + str(secret).lstrip("/")
    out = tmp_path / "out"
    for image_path in (traversal, "../../../../etc/passwd"):
        pt = _digirl_file(tmp_path / "evil.pt", image_path)
        proc = _cli("import-digirl", str(pt), "--out", str(out), f"image_root={root}")
        assert proc.returncode == 2, proc.stderr
        assert "outside image_root" in proc.stderr and "refused" in proc.stderr
        assert "TOPSECRET" not in proc.stderr + proc.stdout
        assert "root:x" not in proc.stderr + proc.stdout
        assert not out.exists()
    # a symlink inside the root that leads out is refused the same way
    (root / "shot_1.png").symlink_to(secret)
    pt = _digirl_file(tmp_path / "evil.pt", "/nfs/images/shot_1.png")
    proc = _cli("import-digirl", str(pt), "--out", str(out), f"image_root={root}")
    assert proc.returncode == 2 and "outside image_root" in proc.stderr, proc.stderr
    assert "TOPSECRET" not in proc.stderr + proc.stdout and not out.exists()


def test_import_without_image_root_reads_no_image(tmp_path) -> None:
    secret = tmp_path / "secret.png"
    secret.write_text("TOPSECRET-CONTENT")  # not an image: decoding would fail and echo it
    pt = _digirl_file(tmp_path / "a.pt", str(secret))
    proc = _cli("import-digirl", str(pt), "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    assert "screenshots found 0" in proc.stdout and "TOPSECRET" not in proc.stderr


def test_failed_import_leaves_no_output(tmp_path) -> None:
    good = _digirl_file(tmp_path / "good.pt", "/nfs/x_1.png")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"this is not a torch file")
    out = tmp_path / "new" / "out"
    proc = _cli("import-digirl", str(good), str(bad), "--out", str(out))
    assert proc.returncode == 2 and "bad.pt" in proc.stderr, proc.stderr
    assert not (tmp_path / "new").exists()  # nor the parent folder it would have made
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.pt", "good.pt"]

    # into an existing import: the good file's episodes are not added when another fails
    ok = _cli("import-digirl", str(good), "--out", str(out))
    assert ok.returncode == 0, ok.stderr
    before = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.name != ".lock")
    other = _digirl_file(tmp_path / "other.pt", "/nfs/y_1.png")
    proc = _cli("import-digirl", str(other), str(bad), "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.name != ".lock") == before
    assert len(TrajectoryStore(out / "trajectories").index()) == 1
