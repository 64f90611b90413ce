"""A simple on-disk trajectory format for judge evaluation (until the trajectory store lands).

One folder per episode, any number of them under a root::

    DATA/<episode_id>/trajectory.json   task, instruction, steps (actions), outcome, ground truth
    DATA/<episode_id>/screen_000.png    the screen before step 0, ..., screen_H.png after the last

``trajectory.json`` holds ``format`` ("devicerl-trajectory/1"), ``task``, ``instruction``,
``seed``, ``episode_id``, ``end_reason``, ``success``, ``truncation_cause``, ``screen_size``,
``ground_truth`` (a human label: true / false / null), ``steps`` (``action`` as
`Action.to_dict`, ``reward``, ``text``, ``info`` with its JSON-safe values) and ``screens``
(one file name or null per observation, the final one last).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from devicerl.actions import Action
from devicerl.errors import DataError
from devicerl.records import EndReason, Observation, Step, Trajectory

FORMAT = "devicerl-trajectory/1"
FILE = "trajectory.json"


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if isinstance(v, (str, int, float, bool, type(None)))}


def save_trajectory(trajectory: Trajectory, root: str | Path) -> Path:
    """Write ``trajectory`` under ``root/<episode_id>/`` and return that folder."""
    from PIL import Image

    folder = Path(root) / trajectory.episode_id
    folder.mkdir(parents=True, exist_ok=True)
    observations = [s.observation for s in trajectory.steps]
    if trajectory.final_observation is not None:
        observations.append(trajectory.final_observation)
    screens: list[str | None] = []
    for i, obs in enumerate(observations):
        name = None
        if obs.screenshot is not None:
            name = f"screen_{i:03d}.png"
            Image.fromarray(obs.screenshot).save(folder / name)
        screens.append(name)
    size = observations[0].screen_size if observations else (0, 0)
    record = {
        "format": FORMAT,
        "task": trajectory.task,
        "instruction": trajectory.instruction,
        "seed": trajectory.seed,
        "episode_id": trajectory.episode_id,
        "end_reason": trajectory.end_reason.value if trajectory.end_reason else None,
        "success": trajectory.success,
        "truncation_cause": trajectory.truncation_cause,
        "screen_size": list(size),
        "ground_truth": trajectory.extras.get("ground_truth"),
        "steps": [
            {
                "action": s.action.to_dict(),
                "reward": s.reward,
                "text": s.text,
                "info": _plain(s.info),
            }
            for s in trajectory.steps
        ],
        "screens": screens,
    }
    (folder / FILE).write_text(json.dumps(record, indent=1), encoding="utf-8")
    return folder


def _screen(folder: Path, name: str | None, rec: dict[str, Any], i: int) -> Observation:
    from devicerl.judges.fewshot import load_image

    shot = load_image(folder / name) if name else None
    size = tuple(rec.get("screen_size") or (0, 0))
    if shot is not None:
        size = (shot.shape[1], shot.shape[0])
    return Observation(rec["instruction"], size, shot, step=i)  # type: ignore[arg-type]


def load_trajectory(folder: str | Path) -> Trajectory:
    """Read one episode folder; `DataError` naming the file when it is malformed."""
    folder = Path(folder)
    path = folder / FILE
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
        if rec.get("format") != FORMAT:
            raise ValueError(f"format is {rec.get('format')!r}, expected {FORMAT!r}")
        screens = rec["screens"]
        steps = [
            Step(
                observation=_screen(folder, screens[i], rec, i),
                action=Action.from_dict(s["action"]),
                reward=float(s.get("reward", 0.0)),
                text=s.get("text"),
                info=dict(s.get("info") or {}),
            )
            for i, s in enumerate(rec["steps"])
        ]
        n = len(steps)
        final = _screen(folder, screens[n], rec, n) if len(screens) > n else None
        traj = Trajectory(rec["task"], rec["instruction"], rec.get("seed"), steps, final)
        traj.episode_id = rec.get("episode_id") or folder.name
        traj.end_reason = EndReason(rec["end_reason"]) if rec.get("end_reason") else None
        traj.success = bool(rec.get("success"))
        traj.truncation_cause = rec.get("truncation_cause")
        if rec.get("ground_truth") is not None:
            traj.extras["ground_truth"] = rec["ground_truth"]
        return traj
    except (OSError, ValueError, KeyError, IndexError, TypeError, DataError) as e:
        raise DataError(f"trajectory file {path}: {e}") from None


def iter_trajectories(root: str | Path) -> Iterator[Trajectory]:
    """Every episode under ``root`` (a single episode folder, or a folder of them), sorted."""
    root = Path(root)
    if (root / FILE).is_file():
        yield load_trajectory(root)
        return
    if not root.is_dir():
        raise DataError(f"{root}: no such folder")
    found = sorted(p.parent for p in root.glob(f"*/{FILE}"))
    if not found:
        raise DataError(f"{root}: no */{FILE} episode folders found")
    for folder in found:
        yield load_trajectory(folder)


def save_trajectories(trajectories: Iterable[Trajectory], root: str | Path) -> int:
    """Write several episodes; returns how many."""
    n = 0
    for t in trajectories:
        save_trajectory(t, root)
        n += 1
    return n
