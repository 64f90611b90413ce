"""devicerl's config loader against OmegaConf structured configs, on the real `TrainConfig`.

For each input: what OmegaConf 2.x (``merge(structured(TrainConfig), from_dotlist([...]))`` then
``to_object``) and `devicerl.config.load_config` answer, then the mean load time of each. Needs
``pip install omegaconf`` (not a devicerl dependency; see docs/configuration.md).

    python benchmarks/config_loaders.py [--loads 20] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

INPUTS = [
    "actor.lr=3e-4",
    "env_steps=-5",
    "env.num_envs=0",
    "digirl.lamda=0.3",
    "mode=sideways",
    "seed=abc",
    "agent.small.allowed_types=[DUAL_POINT]",
    "tasks.max_steps=null",
    "judge.vlm.cache_path=",
    "env.options={n_boxes: 3}",
    "seed=${env.num_envs}",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loads", type=int, default=20)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    try:
        from omegaconf import OmegaConf
    except ImportError:
        raise SystemExit("omegaconf is not installed: pip install omegaconf") from None
    from devicerl.config import load_config
    from devicerl.errors import ConfigError
    from devicerl.runtime.setup.config import TrainConfig

    def omega(override: str) -> str:
        try:
            merged = OmegaConf.merge(
                OmegaConf.structured(TrainConfig), OmegaConf.from_dotlist([override])
            )
            OmegaConf.to_object(merged)
            return "accepted"
        except Exception as e:
            lines = str(e).splitlines()
            return f"{type(e).__name__} ({len(lines)} lines): {lines[0]}"

    def ours(override: str) -> str:
        try:
            load_config(TrainConfig, None, [override])
            return "accepted"
        except ConfigError as e:
            return f"ConfigError (1 line): {e}"

    rows = [{"input": i, "omegaconf": omega(i), "devicerl": ours(i)} for i in INPUTS]
    for r in rows:
        print(f"{r['input']}\n  omegaconf: {r['omegaconf']}\n  devicerl:  {r['devicerl']}")
    times = {}
    for name, fn in (("omegaconf", omega), ("devicerl", ours)):
        t0 = time.perf_counter()
        for _ in range(args.loads):
            fn("actor.lr=3e-4")
        times[name] = (time.perf_counter() - t0) / args.loads
    ratio = times["omegaconf"] / times["devicerl"]
    print(
        f"load (TrainConfig + 1 override), mean of {args.loads}: omegaconf "
        f"{times['omegaconf'] * 1e3:.1f} ms, devicerl {times['devicerl'] * 1e3:.1f} ms "
        f"({ratio:.0f}x)"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"rows": rows, "load_s": times, "ratio": ratio}, indent=2)
        )


if __name__ == "__main__":
    main()
