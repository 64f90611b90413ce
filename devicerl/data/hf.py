"""Trajectory store -> Hugging Face `datasets.Dataset` (needs the ``hf`` extra)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from devicerl.data.codec import image_format
from devicerl.data.store import TrajectoryStore
from devicerl.errors import ConfigError


def _fill_screenshot_refs(table: pa.Table) -> pa.Table:
    """Replace null screenshots that point at an earlier row of the episode by its bytes, and
    drop rows repeated across shards (left by a crash during compaction)."""
    shots = table.column("screenshot").to_pylist()
    refs = table.column("screenshot_ref").to_pylist()
    episodes = table.column("episode_id").to_pylist()
    steps = table.column("step_index").to_pylist()
    where: dict[tuple[str, int], int] = {}
    keep = []
    for i, (ep, step) in enumerate(zip(episodes, steps)):
        if where.setdefault((ep, step), i) != i:
            continue
        keep.append(i)
        if shots[i] is None and refs[i] is not None:
            shots[i] = shots[where[(ep, refs[i])]]
    index = table.schema.get_field_index("screenshot")
    table = table.set_column(index, "screenshot", pa.array(shots, pa.binary()))
    return table.take(keep) if len(keep) < table.num_rows else table


def _all_pil_readable(shots: list[bytes | None]) -> bool:
    return all(s is None or image_format(s) != "raw" for s in shots)


def to_hf_dataset(
    store: TrajectoryStore, *, final_rows: bool = False, image_feature: bool = True
) -> Any:
    """The store's step rows as a Hugging Face `datasets.Dataset`: one row per step (and per
    final observation with ``final_rows``), deduplicated screenshots filled in.

    The ``screenshot`` column becomes a `datasets.Image` feature when ``image_feature`` is set
    and every image is PNG/JPEG/WebP (``raw``-coded screenshots stay bytes).
    """
    try:
        import datasets
    except ImportError:  # pragma: no cover - exercised only without the hf extra
        msg = "to_hf_dataset needs the 'datasets' package: pip install devicerl[hf]"
        raise ConfigError(msg) from None
    table = _fill_screenshot_refs(store.step_table())
    if not final_rows:
        table = table.filter(pc.equal(table.column("is_final"), False))
    table = table.drop(["screenshot_ref"])
    ds = datasets.Dataset(table)
    if image_feature and _all_pil_readable(table.column("screenshot").to_pylist()):
        ds = ds.cast_column("screenshot", datasets.Image())
    return ds
