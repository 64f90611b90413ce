"""``devicerl import-digirl FILE... --out DIR``: convert DigiRL ``.pt`` trajectories to a store.

The output is a run folder (``DIR/trajectories/``, `devicerl.cli.import_folder`), so
``devicerl view DIR`` shows the imported episodes and offline or off-to-online training can start
from them. The count printed is the count stored.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from devicerl.cli.common import add_config_args, resolve_config


@dataclass
class ImportConfig:
    """Options of `devicerl import-digirl`."""

    image_root: str | None = field(
        default=None,
        metadata={"help": "folder holding the screenshots named by image_path (by file name)"},
    )
    tasks: str | None = field(
        default=None,
        metadata={
            "help": "task spec (e.g. an AitW list such as general_train.txt) whose task names "
            "replace digirl/<hash> for matching instructions"
        },
    )
    features: bool = field(
        default=True, metadata={"help": "keep BLIP-2 image_features in observation extras"}
    )
    codec: str = field(default="webp-lossless", metadata={"help": "screenshot codec"})

    def validate(self) -> None:
        from devicerl.cli.import_folder import check_store_codec

        check_store_codec(self.codec)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import-digirl",
        help="convert DigiRL .pt trajectory files into a devicerl trajectory store",
        description="Load DigiRL's released trajectory files safely (torch.load with "
        "weights_only=True and only numpy's array types allowed) and write them to "
        "DIR/trajectories/ as Parquet shards.",
    )
    p.add_argument("files", nargs="+", metavar="FILE.pt", help="DigiRL trajectory files")
    p.add_argument("--out", required=True, metavar="DIR", help="output run folder")
    add_config_args(p, ImportConfig)
    p.set_defaults(func=run)


def _task_names(spec: str | None) -> dict[str, str] | None:
    if not spec:
        return None
    from devicerl.tasks import resolve

    return {" ".join(t.instruction.lower().split()): t.name for t in resolve(spec) if t.instruction}


def run(args: argparse.Namespace) -> int:
    from devicerl.cli.import_folder import check_import_folder, import_into
    from devicerl.data.digirl_import import import_digirl
    from devicerl.errors import ConfigError
    from devicerl.files import check_apart

    # Positional KEY=VALUE words land in `files` too (argparse is greedy): move them.
    args.config_overrides += [f for f in args.files if "=" in f and not f.endswith(".pt")]
    files = [f for f in args.files if f not in args.config_overrides]
    cfg = resolve_config(args)
    out = Path(args.out)
    inputs = [("FILE.pt", f) for f in files]
    check_apart(args.out, inputs + ([("image_root", cfg.image_root)] if cfg.image_root else []))
    check_import_folder(out, "import-digirl")  # before any work
    if cfg.image_root and not Path(cfg.image_root).is_dir():
        raise ConfigError(f"image_root: {cfg.image_root} is not a folder")
    task_names = _task_names(cfg.tasks)
    kwargs = {
        "image_root": cfg.image_root,
        "features": cfg.features,
        "task_names": task_names,
        "codec": cfg.codec,
    }
    stats = import_into(out, lambda store: import_digirl(files, store, **kwargs))
    rate = stats.successes / stats.trajectories if stats.trajectories else 0.0
    again = f"; {stats.already_stored} already in the store" if stats.already_stored else ""
    print(
        f"imported {stats.trajectories} trajectories ({stats.steps} steps, success rate "
        f"{rate:.1%}){again}; screenshots found {stats.images_found}, missing "
        f"{stats.images_missing} -> {out / 'trajectories'}"
    )
    return 0
