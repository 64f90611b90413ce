"""The Parquet layout of trajectory shards, and `Trajectory` <-> row conversion.

One row per step, plus one ``final`` row per episode that carries the final observation (or no
observation). Episode fields repeat on every row (Parquet's dictionary encoding makes that
nearly free) so any row can be filtered by task or outcome without a join. The columns are
derived from the record dataclasses (`devicerl.data.columns`): the episode's from `Trajectory`,
a row's from `Observation` and `Step`; this module adds only the store's own columns (a row's
place, the episode's length and return, the action's type for filtering) and the screenshots. A
screenshot identical to an earlier one in the same episode is stored once: the later row holds
``screenshot = null`` and ``screenshot_ref`` = the step index of the row with the bytes.

Bump `STORE_VERSION` when a column changes meaning; readers refuse shards from a newer version
and read older ones: a column a shard lacks (version 1 had no plan, step-budget or phase
columns) reads as its field's default.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from devicerl.data.codec import decode_image, encode_image
from devicerl.data.columns import FieldColumns, record_fields
from devicerl.errors import DataError
from devicerl.records import Observation, Step, Trajectory
from devicerl.secrets import scrubber

#: Version of the shard layout (file metadata key ``devicerl.store_version``).
STORE_VERSION = 2
META_VERSION = b"devicerl.store_version"
META_CODEC = b"devicerl.codec"

#: The store's own columns: of the episode, of each row's place, of a row's screenshot.
_EPISODE_OWN = [pa.field("num_steps", pa.int32()), pa.field("total_reward", pa.float64())]
_ROW_OWN = [
    pa.field("is_final", pa.bool_()),
    pa.field("step_index", pa.int32()),
    pa.field("has_observation", pa.bool_()),
]
_SCREENSHOT = [pa.field("screenshot", pa.binary()), pa.field("screenshot_ref", pa.int32())]
_ACTION_TYPE = pa.field("action_type", pa.string())


def _columns(parts: list[FieldColumns]) -> list[pa.Field]:
    return [c for p in parts for c in p.columns]


def _write(parts: list[FieldColumns], record: Any, row: dict[str, Any]) -> dict[str, Any]:
    for p in parts:
        p.write(getattr(record, p.name), row)
    return row


def _read(parts: list[FieldColumns], row: dict[str, Any]) -> dict[str, Any]:
    return {p.name: p.read(row) for p in parts}


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


def _scrubbed(value: Any, scrub: Callable[[str], str]) -> Any:
    """``value`` with every text in it (JSON cells, element structs) through the secret
    scrubber (`devicerl.secrets`)."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: _scrubbed(v, scrub) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v, scrub) for v in value]
    return value


class StoreLayout:
    """The shard layout of these record classes (`LAYOUT`: the package's records). A test
    builds one from a record with a field more to see it stored with no other edit."""

    def __init__(
        self, trajectory: type = Trajectory, step: type = Step, observation: type = Observation
    ) -> None:
        self.classes = (trajectory, step, observation)
        self._episode = record_fields(trajectory, skip=("steps", "final_observation"))
        self._observation = record_fields(observation)
        self._step = record_fields(step, skip=("observation",))
        episode = [*_columns(self._episode), *_EPISODE_OWN]
        row = [*_ROW_OWN, *_columns(self._observation), *_SCREENSHOT, *_columns(self._step)]
        self.schema = pa.schema([*episode, *row, _ACTION_TYPE])
        self.episode_columns = [f.name for f in episode]
        parts = [*self._episode, *self._observation, *self._step]
        #: Columns every shard has: a shard may lack another (its field has a default).
        self.required = frozenset(
            [c.name for p in parts if p.required for c in p.columns]
            + [f.name for f in [*_EPISODE_OWN, *_ROW_OWN]]
            + ["episode_id"]
        )

    # -- writing --------------------------------------------------------------------------------
    def _observation_cells(
        self, obs: Observation | None, index: int, codec: str, dedup: _ScreenshotDedup
    ) -> dict[str, Any]:
        if obs is None:
            return {"has_observation": False, "elements": []}
        shot, ref = None, None
        if obs.screenshot is not None:
            ref = dedup.ref(index, obs.screenshot)
            if ref is None:
                shot = encode_image(obs.screenshot, codec)
        row = _write(self._observation, obs, {"has_observation": True})
        return {**row, "screenshot": shot, "screenshot_ref": ref}

    def rows(self, t: Trajectory, codec: str) -> Iterator[dict[str, Any]]:
        """The rows of one trajectory: its steps, then its final row (secrets scrubbed)."""
        scrub = scrubber()
        own = {"num_steps": t.length, "total_reward": t.total_reward}
        episode = _scrubbed(_write(self._episode, t, own), scrub)
        dedup = _ScreenshotDedup()
        for i, s in enumerate(t.steps):
            obs = _scrubbed(self._observation_cells(s.observation, i, codec, dedup), scrub)
            step = _scrubbed(_write(self._step, s, {"action_type": s.action.type.value}), scrub)
            yield {**episode, "is_final": False, "step_index": i, **obs, **step}
        obs = self._observation_cells(t.final_observation, t.length, codec, dedup)
        yield {**episode, "is_final": True, "step_index": t.length, **_scrubbed(obs, scrub)}

    def table(self, trajectories: list[Trajectory], codec: str) -> pa.Table:
        """An Arrow table of the given trajectories, in this layout."""
        rows = [r for t in trajectories for r in self.rows(t, codec)]
        columns = {name: [r.get(name) for r in rows] for name in self.schema.names}
        meta = {META_VERSION: str(STORE_VERSION).encode(), META_CODEC: codec}
        return pa.Table.from_pydict(columns, schema=self.schema.with_metadata(meta))

    # -- reading --------------------------------------------------------------------------------
    def _observation_of(self, row: dict[str, Any], pixels: np.ndarray | None) -> Any:
        if not row["has_observation"]:
            return None
        return self.classes[2](**_read(self._observation, row), screenshot=pixels)

    def read_trajectory(self, rows: list[dict[str, Any]], screenshots: bool = True) -> Trajectory:
        """Rebuild one trajectory from its rows (in step order, final row last)."""
        head = rows[-1]
        if not head["is_final"]:
            raise DataError(f"episode {head['episode_id']} has no final row")
        t = self.classes[0](**_read(self._episode, head))
        decoded: dict[int, np.ndarray] = {}
        for row in rows[:-1]:
            obs = self._observation_of(row, _pixels(row, decoded, screenshots))
            if obs is None:
                raise DataError(f"step {row['step_index']} has no observation")
            t.steps.append(self.classes[1](observation=obs, **_read(self._step, row)))
        t.final_observation = self._observation_of(head, _pixels(head, decoded, screenshots))
        if t.length != head["num_steps"]:
            raise DataError(f"episode {t.episode_id} has {t.length} of {head['num_steps']} steps")
        return t

    def read_table(self, table: pa.Table, screenshots: bool = True) -> Iterator[Trajectory]:
        """Trajectories of a shard table, in the order they were written."""
        rows: list[dict[str, Any]] = []
        for row in table.to_pylist():
            rows.append(row)
            if row["is_final"]:
                if any(r["episode_id"] != row["episode_id"] for r in rows):
                    raise DataError(f"episode {row['episode_id']} rows are interleaved")
                try:
                    traj = self.read_trajectory(rows, screenshots)
                except DataError:
                    raise
                except (ValueError, KeyError, TypeError) as e:  # malformed JSON, bad values
                    raise DataError(
                        f"episode {row['episode_id']}: {type(e).__name__}: {e}"
                    ) from None
                yield traj
                rows = []
        if rows:
            raise DataError(f"episode {rows[0]['episode_id']} has no final row")


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


#: The layout of the package's records: what every store reads and writes.
LAYOUT = StoreLayout()
SCHEMA = LAYOUT.schema
EPISODE_COLUMNS = LAYOUT.episode_columns


def trajectories_table(trajectories: list[Trajectory], codec: str) -> pa.Table:
    """An Arrow table of the given trajectories, in the shard schema."""
    return LAYOUT.table(trajectories, codec)


def table_to_trajectories(table: pa.Table, screenshots: bool = True) -> Iterator[Trajectory]:
    """Trajectories of a shard table, in the order they were written."""
    return LAYOUT.read_table(table, screenshots)
