"""``devicerl import-adp FILE_OR_DIR... --out DIR``: read Agent Data Protocol trajectories
(standardized JSONL, or a JSON array like ADP's ``sample_std.json``; a folder: its ``*.jsonl``
and ``*.json`` files) into a store (`devicerl.data.adp`).

The output is an import folder (`devicerl.cli.import_folder`): ``devicerl view DIR`` shows the
episodes, and ``offline_data=DIR`` trains from them. A malformed line is one error naming the
file, the line and the field, and nothing is written. Calls with no devicerl action are stored
as invalid actions carrying the call's text, and counted in the summary line by function.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from devicerl.cli.common import add_config_args, resolve_config


@dataclass
class AdpImportConfig:
    """Options of `devicerl import-adp`."""

    codec: str = field(default="webp-lossless", metadata={"help": "screenshot codec in the store"})

    def validate(self) -> None:
        from devicerl.cli.import_folder import check_store_codec

        check_store_codec(self.codec)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import-adp",
        help="read Agent Data Protocol (ADP) trajectories into a devicerl trajectory store",
        description="Read ADP standardized trajectories (JSONL, one trajectory a line; images "
        "only from inside the file's folder) and write them to DIR/trajectories/ as Parquet "
        "shards, all or nothing.",
    )
    p.add_argument(
        "files", nargs="+", metavar="FILE_OR_DIR", help="ADP .jsonl/.json files or folders"
    )
    p.add_argument("--out", required=True, metavar="DIR", help="output import folder")
    add_config_args(p, AdpImportConfig)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from devicerl.cli.import_folder import check_import_folder, import_into
    from devicerl.data.adp import import_adp
    from devicerl.data.adp.read import source_files
    from devicerl.files import check_apart

    # Positional KEY=VALUE words land in `files` too (argparse is greedy): move them.
    words = [f for f in args.files if "=" in f and not Path(f).exists()]
    args.config_overrides += words
    files = [f for f in args.files if f not in words]
    cfg = resolve_config(args)
    out = Path(args.out)
    check_apart(args.out, [("FILE_OR_DIR", f) for f in files])
    check_import_folder(out, "import-adp")  # before any work
    for f in files:
        source_files(f)  # a missing file or an empty folder is refused before any work
    stats = import_into(out, lambda store: import_adp(files, store, codec=cfg.codec))
    rate = stats.successes / stats.trajectories if stats.trajectories else 0.0
    again = f"; {stats.already_stored} already in the store" if stats.already_stored else ""
    read = stats.read
    unmapped = sum(read.unmapped.values())
    by_function = ", ".join(f"{k}: {v}" for k, v in read.unmapped.most_common())
    print(
        f"imported {stats.trajectories} trajectories ({stats.steps} steps, success rate "
        f"{rate:.1%}){again}; images read {read.images}; calls with no devicerl action, stored "
        f"as invalid actions: {unmapped}"
        + (f" ({by_function})" if by_function else "")
        + f"; other items ignored: {read.ignored} -> {out / 'trajectories'}"
    )
    return 0
