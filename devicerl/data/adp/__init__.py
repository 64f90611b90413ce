"""The Agent Data Protocol (ADP, neulab/agent-data-protocol, standardized schema 1.2): devicerl
trajectories out (`write.export_adp`) and in (`import_adp`), with what ADP has no field for kept
in each trajectory's ``details`` so a round trip loses nothing ADP carries.

- `vocab`: actions as ``api_action`` calls (AndroidWorld / AndroidControl names on phones,
  BrowserGym names on web pages) and back;
- `elements`: UI elements as image annotations and back;
- `details`: the fields ADP lacks (task, seed, end reason, log-probs, verdicts, ...);
- `write`: trajectories -> JSONL + PNG images; `read`: JSONL -> trajectories, every value checked.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from devicerl.data.adp.read import ReadStats, iter_adp, source_files
from devicerl.records import Trajectory


@dataclass
class ImportStats:
    """What `import_adp` stored (trajectories, steps, successes), how many the store already
    held (left out), and what reading found (`ReadStats`: images, unmapped calls, ...)."""

    read: ReadStats = field(default_factory=ReadStats)
    trajectories: int = 0
    steps: int = 0
    successes: int = 0
    already_stored: int = 0


def import_adp(
    paths: Sequence[str | Path], store_folder: str | Path, *, codec: str | None = None
) -> ImportStats:
    """Read the ADP files (or folders of them) in ``paths`` into the store at ``store_folder``:
    all of them or, on the first malformed line, nothing (`devicerl.data.staging`)."""
    from devicerl.data.staging import add_to_store

    stats = ImportStats()
    files = [f for p in paths for f in source_files(p)]  # every path checked before any work

    def reading() -> Iterator[Trajectory]:
        for f in files:
            yield from iter_adp(f, stats.read)

    def stored(t: Trajectory) -> None:
        stats.trajectories += 1
        stats.steps += t.length
        stats.successes += int(t.success)

    stats.already_stored = add_to_store(store_folder, reading(), codec=codec, stored=stored)
    return stats
