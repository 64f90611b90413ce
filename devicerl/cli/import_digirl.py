"""``devicerl import-digirl FILE... --out DIR``: convert DigiRL ``.pt`` trajectories to a store.

The output is a run folder (``DIR/trajectories/``), so ``devicerl view DIR`` shows the imported
episodes and offline or off-to-online training can start from them. A new DIR is built beside
its final name and renamed at the end; an earlier import's DIR gets the new episodes only once
every file converted; any other existing folder (a training run, a folder of other files) is
refused before any work. A failed import leaves nothing behind. The count printed is the count
stored.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
        from devicerl.data.codec import check_codec
        from devicerl.errors import ConfigError

        try:
            check_codec(self.codec)
        except ValueError as e:
            raise ConfigError(f"codec: {e}") from None


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
    from devicerl.errors import ConfigError
    from devicerl.files import check_apart

    # Positional KEY=VALUE words land in `files` too (argparse is greedy): move them.
    args.config_overrides += [f for f in args.files if "=" in f and not f.endswith(".pt")]
    files = [f for f in args.files if f not in args.config_overrides]
    cfg = resolve_config(args)
    out = Path(args.out)
    inputs = [("FILE.pt", f) for f in files]
    check_apart(args.out, inputs + ([("image_root", cfg.image_root)] if cfg.image_root else []))
    check_import_folder(out)  # before any work
    if cfg.image_root and not Path(cfg.image_root).is_dir():
        raise ConfigError(f"image_root: {cfg.image_root} is not a folder")
    task_names = _task_names(cfg.tasks)
    kwargs = {
        "image_root": cfg.image_root,
        "features": cfg.features,
        "task_names": task_names,
        "codec": cfg.codec,
    }
    if out.exists():
        stats = _import_into_existing(out, files, kwargs)
    else:
        stats = _import_into_new(out, files, kwargs)
    rate = stats.successes / stats.trajectories if stats.trajectories else 0.0
    again = f"; {stats.already_stored} already in the store" if stats.already_stored else ""
    print(
        f"imported {stats.trajectories} trajectories ({stats.steps} steps, success rate "
        f"{rate:.1%}){again}; screenshots found {stats.images_found}, missing "
        f"{stats.images_missing} -> {out / 'trajectories'}"
    )
    return 0


#: What an import folder holds: its store, its lock, and (made by older versions) an empty
#: ``checkpoints/``. Anything else is another command's.
IMPORT_ENTRIES = {"trajectories", ".lock", "checkpoints"}


def check_import_folder(out: Path) -> None:
    """``--out`` is a new folder (whose parent can be written), an empty one, or an earlier
    import's; a run of another command or a folder of other files is refused (one line)."""
    from devicerl.errors import RunError
    from devicerl.files import check_output

    check_output(out, what="--out", error=RunError)
    if not out.is_dir():
        return
    foreign = sorted(
        e.name
        for e in out.iterdir()
        if e.name not in IMPORT_ENTRIES
        or (e.name == "checkpoints" and (not e.is_dir() or any(e.iterdir())))
    )
    if foreign:
        raise RunError(
            f"--out {out} holds {foreign[0]}: it is not an earlier import (imports add only "
            "to a folder made by import-digirl); choose a new folder"
        )


def _import_into_new(out: Path, files: list[str], kwargs: dict[str, Any]) -> Any:
    """Build the whole run folder beside ``out`` and rename it into place at the end."""
    from devicerl.data.digirl_import import import_digirl
    from devicerl.runtime.runs.folder import RunDir

    made = [p for p in reversed(out.parents) if not p.exists()]
    work = RunDir(out.with_name(f".{out.name}.importing-{os.getpid()}"))
    try:
        work.trajectories.mkdir(parents=True)
        stats = import_digirl(files, work.trajectories, **kwargs)
        os.rename(work.path, out)
    except BaseException:
        shutil.rmtree(work.path, ignore_errors=True)
        for p in reversed(made):  # folders this import created for --out
            with contextlib.suppress(OSError):
                p.rmdir()
        raise
    return stats


def _import_into_existing(out: Path, files: list[str], kwargs: dict[str, Any]) -> Any:
    """Add the new episodes to an existing folder's store (locked; staged by `import_digirl`)."""
    from devicerl.data.digirl_import import import_digirl
    from devicerl.errors import RunError
    from devicerl.runtime.runs.folder import RunDir

    run = RunDir(out)
    if not out.is_dir():
        raise RunError(f"--out {out} exists and is not a folder")
    run.lock()
    try:
        return import_digirl(files, run.trajectories, **kwargs)
    finally:
        run.unlock()
