"""The Parquet layout of trajectory shards, and `Trajectory` <-> row conversion.

One row per step, plus one ``final`` row per episode that carries the final observation (or no
observation). Episode fields repeat on every row (Parquet's dictionary encoding makes that
nearly free) so any row can be filtered by task or outcome without a join. Free-form dicts
(infos, extras, verdicts, element attrs) are JSON text (`devicerl.data.codec.dumps_json`, which
keeps numpy arrays exactly). A screenshot identical to an earlier one in the same episode is
stored once: the later row holds ``screenshot = null`` and ``screenshot_ref`` = the step index
of the row with the bytes.

Bump `STORE_VERSION` when a column changes meaning; readers refuse shards from a newer version
and read older ones (version 1 had no plan, step-budget or phase columns: those read as unset).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any

import numpy as np
import pyarrow as pa

from devicerl.actions import Action
from devicerl.data.codec import decode_image, dumps_json, encode_image, loads_json
from devicerl.errors import DataError
from devicerl.records import (
    EndReason,
    EpisodePlan,
    Judgement,
    Observation,
    Step,
    Trajectory,
    UIElement,
)
from devicerl.secrets import scrubber

#: Version of the shard layout (file metadata key ``devicerl.store_version``).
STORE_VERSION = 2
META_VERSION = b"devicerl.store_version"
META_CODEC = b"devicerl.codec"

ELEMENT = pa.struct(
    [
        ("id", pa.string()),
        ("role", pa.string()),
        ("text", pa.string()),
        ("value", pa.string()),
        ("bbox", pa.list_(pa.float64())),
        ("clickable", pa.bool_()),
        ("focused", pa.bool_()),
        ("editable", pa.bool_()),
        ("attrs", pa.string()),
    ]
)

#: Columns describing the episode (same value on every row of an episode).
EPISODE_FIELDS = [
    ("episode_id", pa.string()),
    ("task", pa.string()),
    ("instruction", pa.string()),
    ("seed", pa.int64()),
    ("end_reason", pa.string()),
    ("truncation_cause", pa.string()),
    ("success", pa.bool_()),
    ("num_steps", pa.int32()),
    ("total_reward", pa.float64()),
    ("env_id", pa.int64()),
    ("device", pa.string()),
    ("reset_time_s", pa.float64()),
    ("episode_started_at", pa.float64()),
    ("episode_ended_at", pa.float64()),
    ("record_schema", pa.int32()),
    ("max_steps", pa.int32()),
    ("phase", pa.string()),
    ("plan_policy", pa.string()),
    ("plan_epsilon", pa.float64()),
    ("plan_greedy", pa.bool_()),
    ("plan_group", pa.string()),
    ("plan_group_size", pa.int32()),
    ("judgement", pa.string()),
    ("ground_truth", pa.bool_()),
    ("episode_extras", pa.string()),
]

#: Columns of one row: its position, its observation, and (step rows only) the step.
ROW_FIELDS = [
    ("is_final", pa.bool_()),
    ("step_index", pa.int32()),
    ("has_observation", pa.bool_()),
    ("obs_instruction", pa.string()),
    ("screen_width", pa.int32()),
    ("screen_height", pa.int32()),
    ("obs_step", pa.int32()),
    ("obs_extras", pa.string()),
    ("elements", pa.list_(ELEMENT)),
    ("screenshot", pa.binary()),
    ("screenshot_ref", pa.int32()),
    ("action", pa.string()),
    ("action_type", pa.string()),
    ("reward", pa.float64()),
    ("terminated", pa.bool_()),
    ("truncated", pa.bool_()),
    ("info", pa.string()),
    ("text", pa.string()),
    ("log_prob", pa.float64()),
    ("policy_version", pa.int64()),
    ("agent_time_s", pa.float64()),
    ("device_time_s", pa.float64()),
    ("step_started_at", pa.float64()),
    ("verdict", pa.string()),
]

SCHEMA = pa.schema(EPISODE_FIELDS + ROW_FIELDS)
#: Columns a version-1 shard lacks.
ADDED_AFTER_V1 = (
    "max_steps",
    "phase",
    "plan_policy",
    "plan_epsilon",
    "plan_greedy",
    "plan_group",
    "plan_group_size",
    "judgement",
    "ground_truth",
)
EPISODE_COLUMNS = [name for name, _ in EPISODE_FIELDS]


def schema_with_metadata(codec: str) -> pa.Schema:
    return SCHEMA.with_metadata({META_VERSION: str(STORE_VERSION).encode(), META_CODEC: codec})


# -- writing ------------------------------------------------------------------------------------
def _episode_values(t: Trajectory) -> dict[str, Any]:
    return {
        "episode_id": t.episode_id,
        "task": t.task,
        "instruction": t.instruction,
        "seed": t.seed,
        "end_reason": t.end_reason.value if t.end_reason is not None else None,
        "truncation_cause": t.truncation_cause,
        "success": bool(t.success),
        "num_steps": t.length,
        "total_reward": t.total_reward,
        "env_id": t.env_id,
        "device": t.device,
        "reset_time_s": float(t.reset_time_s),
        "episode_started_at": float(t.started_at),
        "episode_ended_at": t.ended_at,
        "record_schema": int(t.schema_version),
        "max_steps": t.max_steps,
        "phase": t.phase,
        **_plan_values(t.plan),
        "judgement": dumps_json(asdict(t.judgement)) if t.judgement is not None else None,
        "ground_truth": t.ground_truth,
        "episode_extras": dumps_json(t.extras),
    }


def _plan_values(plan: EpisodePlan | None) -> dict[str, Any]:
    if plan is None:
        return {}
    return {
        "plan_policy": plan.policy,
        "plan_epsilon": float(plan.epsilon),
        "plan_greedy": plan.greedy,
        "plan_group": plan.group,
        "plan_group_size": int(plan.group_size),
    }


def _judgement(text: str | None) -> Judgement | None:
    data = loads_json(text) if text else None
    if not isinstance(data, dict):
        return None
    data.pop("replaced_unknown", None)  # stores written while unknown verdicts could be replaced
    return Judgement(**data)


def _plan(head: dict[str, Any]) -> EpisodePlan | None:
    if head.get("plan_policy") is None:
        return None
    return EpisodePlan(
        policy=head["plan_policy"],
        epsilon=float(head["plan_epsilon"] or 0.0),
        greedy=head["plan_greedy"],
        group=head["plan_group"],
        group_size=int(head["plan_group_size"] or 1),
    )


def _element_dict(e: UIElement) -> dict[str, Any]:
    return {
        "id": e.id,
        "role": e.role,
        "text": e.text,
        "value": e.value,
        "bbox": [float(v) for v in e.bbox],
        "clickable": bool(e.clickable),
        "focused": bool(e.focused),
        "editable": bool(e.editable),
        "attrs": dumps_json(e.attrs),
    }


class _ScreenshotDedup:
    """Finds a screenshot equal to an earlier one of the same episode (crc32, then exact)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[int, tuple[int, ...]], list[tuple[int, np.ndarray]]] = {}

    def ref(self, index: int, pixels: np.ndarray) -> int | None:
        key = (zlib.crc32(np.ascontiguousarray(pixels).data), pixels.shape)
        bucket = self._seen.setdefault(key, [])
        for earlier, px in bucket:
            if px is pixels or np.array_equal(px, pixels):
                return earlier
        bucket.append((index, pixels))
        return None


def _observation_values(
    obs: Observation | None, index: int, codec: str, dedup: _ScreenshotDedup
) -> dict[str, Any]:
    if obs is None:
        return {"has_observation": False, "elements": []}
    shot, ref = None, None
    if obs.screenshot is not None:
        ref = dedup.ref(index, obs.screenshot)
        if ref is None:
            shot = encode_image(obs.screenshot, codec)
    return {
        "has_observation": True,
        "obs_instruction": obs.instruction,
        "screen_width": int(obs.screen_size[0]),
        "screen_height": int(obs.screen_size[1]),
        "obs_step": int(obs.step),
        "obs_extras": dumps_json(obs.extras),
        "elements": [_element_dict(e) for e in obs.elements],
        "screenshot": shot,
        "screenshot_ref": ref,
    }


def _step_values(s: Step) -> dict[str, Any]:
    return {
        "action": s.action.to_json(),
        "action_type": s.action.type.value,
        "reward": float(s.reward),
        "terminated": bool(s.terminated),
        "truncated": bool(s.truncated),
        "info": dumps_json(s.info),
        "text": s.text,
        "log_prob": None if s.log_prob is None else float(s.log_prob),
        "policy_version": int(s.policy_version),
        "agent_time_s": float(s.agent_time_s),
        "device_time_s": float(s.device_time_s),
        "step_started_at": float(s.started_at),
        "verdict": dumps_json(s.verdict),
    }


def _scrubbed(row: dict[str, Any], scrub: Callable[[str], str]) -> dict[str, Any]:
    """``row`` with every text value passed through the secret scrubber (`devicerl.secrets`)."""
    for k, v in row.items():
        if isinstance(v, str):
            row[k] = scrub(v)
    for e in row.get("elements") or ():
        for k in ("text", "value", "attrs"):
            if isinstance(e.get(k), str):
                e[k] = scrub(e[k])
    return row


def trajectory_rows(t: Trajectory, codec: str) -> Iterator[dict[str, Any]]:
    """The rows of one trajectory: its steps, then its final row (secrets scrubbed)."""
    scrub = scrubber()
    episode = _scrubbed(_episode_values(t), scrub)
    dedup = _ScreenshotDedup()
    for i, s in enumerate(t.steps):
        obs = _scrubbed(_observation_values(s.observation, i, codec, dedup), scrub)
        step = _scrubbed(_step_values(s), scrub)
        yield {**episode, "is_final": False, "step_index": i, **obs, **step}
    obs = _scrubbed(_observation_values(t.final_observation, t.length, codec, dedup), scrub)
    yield {**episode, "is_final": True, "step_index": t.length, **obs}


def trajectories_table(trajectories: list[Trajectory], codec: str) -> pa.Table:
    """An Arrow table of the given trajectories, in the shard schema."""
    rows = [r for t in trajectories for r in trajectory_rows(t, codec)]
    columns = {name: [r.get(name) for r in rows] for name in SCHEMA.names}
    return pa.Table.from_pydict(columns, schema=schema_with_metadata(codec))


# -- reading ------------------------------------------------------------------------------------
def _element(d: dict[str, Any]) -> UIElement:
    return UIElement(
        id=d["id"],
        role=d["role"],
        text=d["text"],
        value=d["value"],
        bbox=tuple(d["bbox"]),  # type: ignore[arg-type]
        clickable=d["clickable"],
        focused=d["focused"],
        editable=d["editable"],
        attrs=loads_json(d["attrs"]) or {},
    )


def _observation(row: dict[str, Any], pixels: np.ndarray | None) -> Observation | None:
    if not row["has_observation"]:
        return None
    return Observation(
        instruction=row["obs_instruction"],
        screen_size=(row["screen_width"], row["screen_height"]),
        screenshot=pixels,
        elements=[_element(e) for e in row["elements"] or []],
        step=row["obs_step"],
        extras=loads_json(row["obs_extras"]) or {},
    )


def _step(row: dict[str, Any], obs: Observation | None) -> Step:
    if obs is None:
        raise DataError(f"step {row['step_index']} has no observation")
    return Step(
        observation=obs,
        action=Action.from_json(row["action"]),
        reward=row["reward"],
        terminated=row["terminated"],
        truncated=row["truncated"],
        info=loads_json(row["info"]) or {},
        text=row["text"],
        log_prob=row["log_prob"],
        policy_version=row["policy_version"],
        agent_time_s=row["agent_time_s"],
        device_time_s=row["device_time_s"],
        started_at=row["step_started_at"],
        verdict=loads_json(row["verdict"]),
    )


def _pixels(row: dict[str, Any], decoded: dict[int, np.ndarray], screenshots: bool):
    if not screenshots:
        return None
    if row.get("screenshot") is not None:
        decoded[row["step_index"]] = decode_image(row["screenshot"])
        return decoded[row["step_index"]]
    ref = row.get("screenshot_ref")
    if ref is None:
        return None
    if ref not in decoded:
        raise DataError(f"screenshot_ref {ref} of step {row['step_index']} points nowhere")
    return decoded[ref]


def rows_to_trajectory(rows: list[dict[str, Any]], screenshots: bool = True) -> Trajectory:
    """Rebuild one trajectory from its rows (in step order, final row last)."""
    head = rows[-1]
    if not head["is_final"]:
        raise DataError(f"episode {head['episode_id']} has no final row")
    reason = head["end_reason"]
    t = Trajectory(
        task=head["task"],
        instruction=head["instruction"],
        seed=head["seed"],
        end_reason=EndReason(reason) if reason is not None else None,
        truncation_cause=head["truncation_cause"],
        success=head["success"],
        episode_id=head["episode_id"],
        env_id=head["env_id"],
        device=head["device"],
        reset_time_s=head["reset_time_s"],
        started_at=head["episode_started_at"],
        ended_at=head["episode_ended_at"],
        schema_version=head["record_schema"],
        max_steps=head.get("max_steps"),
        phase=head.get("phase") or "train",
        plan=_plan(head),
        judgement=_judgement(head.get("judgement")),
        ground_truth=head.get("ground_truth"),
        extras=loads_json(head["episode_extras"]) or {},
    )
    decoded: dict[int, np.ndarray] = {}
    for row in rows[:-1]:
        t.steps.append(_step(row, _observation(row, _pixels(row, decoded, screenshots))))
    t.final_observation = _observation(head, _pixels(head, decoded, screenshots))
    if t.length != head["num_steps"]:
        raise DataError(f"episode {t.episode_id} has {t.length} of {head['num_steps']} steps")
    return t


def table_to_trajectories(table: pa.Table, screenshots: bool = True) -> Iterator[Trajectory]:
    """Trajectories of a shard table, in the order they were written."""
    rows: list[dict[str, Any]] = []
    for row in table.to_pylist():
        rows.append(row)
        if row["is_final"]:
            if any(r["episode_id"] != row["episode_id"] for r in rows):
                raise DataError(f"episode {row['episode_id']} rows are interleaved")
            try:
                traj = rows_to_trajectory(rows, screenshots)
            except DataError:
                raise
            except (ValueError, KeyError, TypeError) as e:  # malformed JSON, bad values
                raise DataError(f"episode {row['episode_id']}: {type(e).__name__}: {e}") from None
            yield traj
            rows = []
    if rows:
        raise DataError(f"episode {rows[0]['episode_id']} has no final row")
