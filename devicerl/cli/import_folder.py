"""The output folder of the import commands (``import-digirl``, ``import-adp``): a run folder
whose store receives the imported trajectories, all of them or none.

A new folder is built beside its final name and renamed at the end; an earlier import's folder
gets the new episodes (under its lock) only once everything converted; any other existing
folder (a training run, a folder of other files) is refused before any work. A failed import
leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

#: What an import folder holds: its store, its lock, and (made by older versions) an empty
#: ``checkpoints/``. Anything else is another command's.
IMPORT_ENTRIES = {"trajectories", ".lock", "checkpoints"}


def check_store_codec(codec: str) -> None:
    """An import's ``codec`` option names a screenshot codec of the store (one line if not)."""
    from devicerl.data.codec import check_codec
    from devicerl.errors import ConfigError

    try:
        check_codec(codec)
    except ValueError as e:
        raise ConfigError(f"codec: {e}") from None


def check_import_folder(out: Path, command: str) -> None:
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
            f"to a folder made by {command}); choose a new folder"
        )


def import_into(out: Path, convert: Callable[[Path], T]) -> T:
    """Run ``convert(store_folder)`` for the import folder ``out`` (checked first with
    `check_import_folder`): into a new folder renamed into place at the end, or into an
    existing import's store under its lock."""
    from devicerl.errors import RunError
    from devicerl.runtime.runs.folder import RunDir

    if out.exists():
        if not out.is_dir():
            raise RunError(f"--out {out} exists and is not a folder")
        run = RunDir(out)
        run.lock()
        try:
            return convert(run.trajectories)
        finally:
            run.unlock()
    made = [p for p in reversed(out.parents) if not p.exists()]
    work = RunDir(out.with_name(f".{out.name}.importing-{os.getpid()}"))
    try:
        work.trajectories.mkdir(parents=True)
        result = convert(work.trajectories)
        os.rename(work.path, out)
    except BaseException:
        shutil.rmtree(work.path, ignore_errors=True)
        for p in reversed(made):  # folders this import created for --out
            with contextlib.suppress(OSError):
                p.rmdir()
        raise
    return result
