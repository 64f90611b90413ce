"""Write a sample trajectory store with the devicerl found on the path, and beside it the JSON of
what that devicerl reads back (`store_samples.canonical`): the committed ``v1/`` and ``v2/``
were written this way at the commits their ``commit.txt`` names, so today's reader is held to
what the writer's own version read.

Usage: PYTHONPATH=<checkout of that commit> python tests/data/stores/write.py OUT_DIR
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # tests/: store_samples

from store_samples import canonical, sample_trajectories  # noqa: E402

from devicerl.data.store import TrajectoryStore, TrajectoryWriter  # noqa: E402


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=False)
    store = out / "store"
    with TrajectoryWriter(store, flush_every=2) as writer:
        for t in sample_trajectories():
            writer.append(t)
    back = [canonical(t) for t in TrajectoryStore(store).read_all()]
    (out / "expected.json").write_text(json.dumps(back, indent=1, sort_keys=True) + "\n")
    import devicerl

    root = Path(devicerl.__file__).resolve().parents[1]
    commit = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    (out / "commit.txt").write_text(commit + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
