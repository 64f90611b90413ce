"""ADP export and import throughput (steps/s) and size on disk, against the Parquet store.

A store of ``--steps`` steps (default 5,000) is collected from the synthetic device with
screenshots (its default 270x585 frames, boxes drawn with labels) by the random agent and
written with the store's default codec (WebP lossless), 64 episodes a shard. Then:

- export: `devicerl.data.adp.write.export_adp` of the whole store (read, decode, PNG-encode each
  distinct screen, JSON) -> steps/s;
- import: `devicerl.data.adp.import_adp` of that export into a new store (parse and check
  every value, decode PNG, WebP-encode, Parquet) -> steps/s;
- sizes: the Parquet store, the ADP folder (JSONL + PNG files) and its JSONL alone, in bytes,
  and ADP over Parquet.

Every phase runs once (the numbers are a machine's, at its load: compare the ratio, not the
absolute speeds, across machines).

    python benchmarks/adp_io.py [--quick] [--steps N] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from devicerl.agents.random import RandomPolicy
from devicerl.data.adp import import_adp
from devicerl.data.adp.write import JSONL_NAME, export_adp
from devicerl.data.store import TrajectoryStore, TrajectoryWriter
from devicerl.envs import make
from devicerl.runtime.acting.rollout import rollout


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def collect(folder: Path, steps: int) -> int:
    """A store of at least ``steps`` steps from the synthetic device; returns the step count."""
    env = make("synthetic", n_boxes=6, max_len=8, seed=0)
    policy = RandomPolicy(seed=0)
    done, seed = 0, 0
    with TrajectoryWriter(folder, flush_every=64, flush_interval_s=None, fsync=False) as w:
        while done < steps:
            task = "synthetic/tap" if seed % 2 else "synthetic/type"
            t = rollout(env, policy, task, seed)
            seed += 1
            w.append(t)
            done += t.length
    env.close()
    return done


def run(steps: int, root: Path) -> dict:
    store, adp, back = root / "store", root / "adp", root / "back"
    t0 = time.perf_counter()
    n = collect(store, steps)
    collect_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    exported = export_adp(TrajectoryStore(store).iter_trajectories(), adp)
    export_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    imported = import_adp([adp], back)
    import_s = time.perf_counter() - t0
    assert exported.steps == imported.steps == n
    sizes = {
        "parquet_store": _size(store),
        "adp": _size(adp),
        "adp_jsonl": (adp / JSONL_NAME).stat().st_size,
    }
    return {
        "steps": n,
        "trajectories": exported.trajectories,
        "distinct_screens": exported.images,
        "collect_s": round(collect_s, 2),
        "export_s": round(export_s, 2),
        "import_s": round(import_s, 2),
        "export_steps_per_s": round(n / export_s, 1),
        "import_steps_per_s": round(n / import_s, 1),
        "bytes": sizes,
        "adp_over_parquet": round(sizes["adp"] / sizes["parquet_store"], 2),
        "reimported_store_bytes": _size(back),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="500 steps instead of --steps")
    ap.add_argument("--steps", type=int, default=5000, help="steps in the store")
    ap.add_argument("--json", default=None, help="write results to this JSON file")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="adp-io-") as tmp:
        r = run(500 if args.quick else args.steps, Path(tmp))
    mib = {k: f"{v / 2**20:.1f} MiB" for k, v in r["bytes"].items()}
    print(
        f"{r['steps']} steps ({r['trajectories']} episodes, {r['distinct_screens']} distinct "
        f"screens): export {r['export_steps_per_s']} steps/s, import "
        f"{r['import_steps_per_s']} steps/s; on disk: Parquet store {mib['parquet_store']}, "
        f"ADP {mib['adp']} (JSONL {mib['adp_jsonl']}), ADP/Parquet {r['adp_over_parquet']}x"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
