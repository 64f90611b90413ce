"""DigiRL import, on files built here with the reference's structure (torch.save of a list of
trajectories, each a list of step dicts holding numpy features and AutoUI action strings)."""

import os
import pickle
import zipfile

import numpy as np
import pytest
import torch
from _runs import devicerl_cli
from PIL import Image

from devicerl.actions import Action, format_autoui
from devicerl.data.digirl_import import import_digirl, iter_digirl, load_digirl_file
from devicerl.data.store import TrajectoryStore
from devicerl.errors import DataError
from devicerl.records import EndReason

GAMMA = 0.95
# (instruction, actions, rewards): solved, gave up, ran out of steps, unparseable output
EPISODES = [
    (
        "Search for hotels in Paris",
        [Action.tap(0.2, 0.3), Action.type_text('hotels, "Paris"'), Action.complete()],
        [0, 0, 1],
    ),
    ("Open the settings app", [Action.back(), Action.home(), Action.complete()], [0, 0, 0]),
    ("What's the weather today?", [Action.swipe(0.5, 0.8, 0.5, 0.2)] * 3, [0, 0, 0]),
    ("Go to ebay.com", [None, Action.enter()], [0, 0]),
]
FEATURE_DIM = 16


def _action_text(a: Action | None) -> str:
    if a is None:
        return "Action Plan: [??] ; Action Decision: I do not know"
    return format_autoui(a, plan="[DUAL_POINT,TYPE]", precision=4)


def _mc_returns(rewards: list[float]) -> list[float]:
    out, g = [], 0.0
    for r in reversed(rewards):
        g = r + GAMMA * g
        out.append(g)
    return out[::-1]


def reference_trajectories(image_dir) -> list[list[dict]]:
    """The reference's structure; screenshots exist on disk only for the first episode."""
    rng = np.random.default_rng(0)
    data = []
    for k, (task, actions, rewards) in enumerate(EPISODES):
        image_id = f"1718747809.{k}"
        feats = [
            rng.standard_normal(FEATURE_DIM).astype(np.float32) for _ in range(len(actions) + 1)
        ]
        if k == 0:
            for n in range(len(actions) + 1):
                px = np.full((40, 24, 3), 30 * n, dtype=np.uint8)
                Image.fromarray(px).save(image_dir / f"{image_id}_{n}.png")
        traj, prev = [], "None"
        for h, (a, r) in enumerate(zip(actions, rewards)):
            prompt = f"Previous Actions: {prev} Goal: {task}</s>"
            prev = _action_text(a)
            traj.append(
                {
                    "observation": prompt,
                    "next_observation": f"Previous Actions: {prev} Goal: {task}</s>",
                    "image_features": feats[h],
                    "next_image_features": feats[h + 1],
                    "image_path": f"/nfs/kun2/users/digirl/images/{image_id}_{h + 1}.png",
                    "video_path": None,
                    "task": task,
                    "reward": r if h % 2 else np.float64(r),
                    "done": np.bool_(h == len(actions) - 1),
                    "action": _action_text(a),
                }
            )
        for d, mc in zip(traj, _mc_returns(rewards)):
            d["trajectory_reward"] = np.float64(sum(rewards))
            d["mc_return"] = np.float64(mc)
        data.append(traj)
    return data


@pytest.fixture()
def reference(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    data = reference_trajectories(images)
    path = tmp_path / "general-off2on-zeroshot-trajectories.pt"
    torch.save(data, path)
    return path, images, data


def test_mapping(reference) -> None:
    path, images, data = reference
    trajs = list(iter_digirl(path, image_root=images))
    assert [t.end_reason for t in trajs] == [
        EndReason.SUCCESS, EndReason.AGENT_ENDED, EndReason.MAX_STEPS, EndReason.MAX_STEPS
    ]  # fmt: skip
    assert [t.success for t in trajs] == [True, False, False, False]
    for t, raw, (task, actions, _) in zip(trajs, data, EPISODES):
        assert t.instruction == task and t.task.startswith("digirl/") and t.length == len(raw)
        for h, (s, d) in enumerate(zip(t.steps, raw)):
            assert s.text == d["action"]
            assert s.action.is_invalid == (actions[h] is None)
            if actions[h] is not None:
                assert s.action == actions[h]
            assert np.array_equal(s.observation.extras["image_features"], d["image_features"])
            assert s.observation.extras["prompt"] == d["observation"]
            assert s.info["mc_return"] == pytest.approx(float(d["mc_return"]))
            assert s.reward == float(d["reward"]) and s.terminated == bool(d["done"])
        final = t.final_observation.extras["image_features"]
        assert np.array_equal(final, raw[-1]["next_image_features"])
    # screenshots: step h shows <id>_h.png, the final observation the last image_path
    t0 = trajs[0]
    for n, obs in enumerate([s.observation for s in t0.steps] + [t0.final_observation]):
        assert obs.screen_size == (24, 40) and int(obs.screenshot[0, 0, 0]) == 30 * n
    assert all(s.observation.screenshot is None for s in trajs[1].steps)
    assert trajs[1].steps[0].observation.screen_size == (0, 0)


def test_import_into_store_is_idempotent(reference, tmp_path) -> None:
    path, images, data = reference
    out = tmp_path / "store"
    stats = import_digirl([path], out, image_root=images, features=False)
    assert (stats.trajectories, stats.successes) == (4, 1)
    assert stats.steps == sum(len(t) for t in data)
    assert (stats.images_found, stats.images_missing) == (4, 4 + 4 + 3)
    shards = sorted(out.glob("shard-*.parquet"))
    import_digirl([path], out, image_root=images)  # same file again: same episode ids
    assert sorted(out.glob("shard-*.parquet")) == shards  # nothing new written
    back = TrajectoryStore(out).read_all()
    assert len(back) == 4
    assert "image_features" not in back[0].steps[0].observation.extras  # first import wins
    assert int(back[0].steps[2].observation.screenshot[0, 0, 0]) == 60


def test_cli_with_task_list(reference, tmp_path) -> None:
    path, images, _ = reference
    task_list = tmp_path / "general_train.txt"
    task_list.write_text("Open the settings app\nsearch for HOTELS in paris\n")
    out = tmp_path / "run"
    r = devicerl_cli("import-digirl", str(path), "--out", str(out), "--set",
                     f"image_root={images}", f"tasks={task_list}")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "imported 4 trajectories" in r.stdout and "success rate 25.0%" in r.stdout
    tasks = [t.task for t in TrajectoryStore(out / "trajectories").read_all(screenshots=False)]
    assert tasks[:2] == ["aitw/general_train/0001", "aitw/general_train/0000"]
    assert tasks[2].startswith("digirl/")


class Evil:
    def __init__(self, marker) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_hostile_pickles_are_refused(tmp_path) -> None:
    marker = tmp_path / "pwned"
    zipped = tmp_path / "evil.pt"
    torch.save([[{"observation": Evil(marker), "task": "x"}]], zipped)
    with pytest.raises(DataError, match=r"refused to load .*evil\.pt.*system") as e:
        load_digirl_file(zipped)
    assert "\n" not in str(e.value)
    legacy = tmp_path / "legacy.pt"
    legacy.write_bytes(pickle.dumps([[Evil(marker)]], protocol=2))
    with pytest.raises(DataError, match=r"legacy\.pt"):
        load_digirl_file(legacy)
    r = devicerl_cli("import-digirl", str(zipped), "--out", str(tmp_path / "imp"))
    assert r.returncode == 2 and "refused to load" in r.stderr
    assert not marker.exists()


def test_numpy1_spelling_and_bad_structure(reference, tmp_path) -> None:
    path, _, data = reference
    old = tmp_path / "numpy1.pt"
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(old, "w") as zout:
        for name in zin.namelist():
            blob = zin.read(name)
            if name.endswith("data.pkl"):
                assert b"numpy._core.multiarray" in blob
                blob = blob.replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
            zout.writestr(name, blob)
    loaded = load_digirl_file(old)
    assert np.array_equal(loaded[2][1]["image_features"], data[2][1]["image_features"])
    bad = tmp_path / "bad.pt"
    torch.save({"not": "a list"}, bad)
    with pytest.raises(DataError, match=r"bad\.pt: expected a list of trajectories"):
        load_digirl_file(bad)
    torch.save([[{"observation": "o"}]], bad)
    with pytest.raises(DataError, match=r"trajectory 0 step 0 lacks keys \['task'"):
        load_digirl_file(bad)


def test_newer_action_types_in_autoui_text_import_typed(tmp_path) -> None:
    """A file in DigiRL's structure whose action texts use the AutoUI spelling of the newer
    types (as `format_autoui` writes them) imports them as typed actions."""
    actions = [
        Action.open_app("Clock"),
        Action.wait(2.0),
        Action.long_press(0.5, 0.25, 1.0),
        Action.answer("7:30"),
        Action.complete(),
    ]
    steps = [
        {"observation": "Goal: when is the alarm?</s>", "task": "When is the alarm?",
         "reward": 0.0, "done": h == len(actions) - 1, "action": _action_text(a)}
        for h, a in enumerate(actions)
    ]  # fmt: skip
    path = tmp_path / "newer.pt"
    torch.save([steps], path)
    (traj,) = iter_digirl(path)
    assert [s.action for s in traj.steps] == actions
    assert traj.answer == "7:30" and traj.end_reason is EndReason.AGENT_ENDED
