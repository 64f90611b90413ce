"""The store's columns are derived from the records: a shard written now has the columns and
types of one written when they were listed by hand, a field added to a record is stored and
read back with no other edit, and a shard lacking a column reads its field's default (or is
refused when the field has none)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _runs import assert_same
from store_samples import STORES, sample_trajectories

from devicerl.data.schema import LAYOUT, StoreLayout
from devicerl.data.store import TrajectoryStore, TrajectoryWriter
from devicerl.errors import DataError
from devicerl.records import EpisodePlan, Step, Trajectory


def _columns(path) -> dict[str, str]:
    return {f.name: str(f.type) for f in pq.read_schema(path)}


def test_a_shard_written_now_has_the_hand_listed_columns_and_types(tmp_path) -> None:
    with TrajectoryWriter(tmp_path) as w:
        w.extend(sample_trajectories())
    old = next((STORES / "v2" / "store").glob("shard-*.parquet"))
    assert _columns(next(tmp_path.glob("shard-*.parquet"))) == _columns(old)


@dataclass
class NotedStep(Step):
    """A step with one field more: the one edit adding a field takes."""

    note: str | None = None


@dataclass
class RatedTrajectory(Trajectory):
    rating: float = field(default=0.5, metadata={"column_type": "float32"})


def test_a_field_added_to_a_record_is_stored_and_read_back() -> None:
    layout = StoreLayout(trajectory=RatedTrajectory, step=NotedStep)
    assert set(layout.schema.names) - set(LAYOUT.schema.names) == {"note", "rating"}
    assert layout.schema.field("rating").type == pa.float32()
    t = sample_trajectories()[0]
    rated = RatedTrajectory(**{k: v for k, v in vars(t).items() if not k.startswith("_")})
    rated.rating = 0.75
    rated.steps = [NotedStep(**vars(s), note=f"n{i}") for i, s in enumerate(t.steps)]
    table = layout.table([rated], "png")
    (back,) = layout.read_table(table)
    assert type(back) is RatedTrajectory and back.rating == 0.75
    assert [s.note for s in back.steps] == ["n0", "n1", "n2"]
    assert_same(rated, back)


def test_a_missing_column_reads_as_its_default_a_missing_required_one_is_refused(
    tmp_path,
) -> None:
    t = sample_trajectories()[0]
    table = LAYOUT.table([t], "png")
    shard = tmp_path / "shard-x-000000.parquet"
    pq.write_table(table.drop(["phase", "plan_policy", "plan_epsilon"]), shard)
    (back,) = TrajectoryStore(tmp_path).read_all()
    assert back.phase == "train" and back.plan is not None  # the other plan columns are there
    assert back.plan == EpisodePlan(epsilon=0.0, greedy=False, group="g1", group_size=2)
    pq.write_table(table.drop(["obs_instruction"]), shard)
    with pytest.raises(DataError, match=r"lacks columns \['obs_instruction'\]"):
        TrajectoryStore(tmp_path).read_all()
