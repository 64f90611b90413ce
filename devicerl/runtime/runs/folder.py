"""The run folder: one place that defines where a run keeps what.

```
RUN/
  config.yaml       resolved config, secrets redacted (written at start; read to resume)
  provenance.json   git commit, dirty flag, package versions (devicerl.runtime.runs.provenance)
  trajectories/     trajectory store (Parquet shards; devicerl.data.store)
  metrics.jsonl     one JSON object per log call: {"step", "time", "<ns>/<name>": value, ...}
  tb/               TensorBoard event files
  checkpoints/      iter-<N>/ folders and a `latest` pointer (devicerl.runtime.runs.checkpoint)
  report/           static HTML report written by `devicerl view`
  .lock             held by the process that runs in the folder (`devicerl.runtime.runs.lock`)
```

A new run never writes into an existing run: `RunDir.start_new` refuses a folder that exists
and is not empty (``overwrite=True`` deletes a run folder first), and holds the folder's lock
for the run's life. Default folder names carry a timestamp (`reserve_run_path`).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from devicerl.errors import ConfigError, DataError, RunError
from devicerl.files import check_output, read_text, write_json
from devicerl.runtime.runs.lock import LOCK_NAME, RunLock

if TYPE_CHECKING:
    from devicerl.data.store import TrajectoryStore, TrajectoryWriter
    from devicerl.runtime.runs.checkpoint import CheckpointManager
    from devicerl.runtime.runs.metrics import LoggingConfig, MetricsLogger

T = TypeVar("T")


class RunDir:
    """Paths and helpers of one run folder (nothing is created until `create`)."""

    CONFIG = "config.yaml"
    TRAJECTORIES = "trajectories"
    METRICS = "metrics.jsonl"
    TENSORBOARD = "tb"
    CHECKPOINTS = "checkpoints"
    REPORT = "report"

    #: Entries whose presence marks a folder as a run folder (`--overwrite` deletes only those).
    MARKERS = (CONFIG, TRAJECTORIES, METRICS, CHECKPOINTS, LOCK_NAME, "agent", "summary.json")

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock: RunLock | None = None
        #: Whether this process made the folder (a run refused at start removes it, else only
        #: empties it).
        self.made_folder = False

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    @property
    def config_path(self) -> Path:
        return self.path / self.CONFIG

    @property
    def trajectories(self) -> Path:
        return self.path / self.TRAJECTORIES

    @property
    def metrics_path(self) -> Path:
        return self.path / self.METRICS

    @property
    def checkpoints(self) -> Path:
        return self.path / self.CHECKPOINTS

    @property
    def report(self) -> Path:
        return self.path / self.REPORT

    def create(self) -> RunDir:
        """Make the folder and its sub-folders (idempotent)."""
        for p in (self.path, self.trajectories, self.checkpoints):
            p.mkdir(parents=True, exist_ok=True)
        return self

    # -- a new run: never into an existing one ------------------------------------------------
    def is_run(self) -> bool:
        """Whether the folder holds anything a run writes."""
        return any((self.path / m).exists() for m in self.MARKERS)

    def check_new(
        self, overwrite: bool = False, *, resumable: bool = True, overwritable: bool = True
    ) -> None:
        """Raise `RunError` unless a new run may start here (writes nothing): the path can be
        made (names fit, the folder above is writable) and holds no run, unless
        ``overwrite`` (then only a run folder is accepted, to be deleted)."""
        p = self.path
        check_output(p, what="run folder", error=RunError)
        if not p.exists():
            return
        if not p.is_dir():
            raise RunError(f"run folder {p} exists and is not a folder")
        if all(e.name == LOCK_NAME for e in p.iterdir()):
            return
        if not overwrite:
            how = [f"continue it with --resume {p}"] if resumable else []
            how += ["start over with --overwrite (deletes it)"] if overwritable else []
            how.append("choose another --out")
            raise RunError(f"run folder {p} already exists: {', or '.join(how)}")
        if not self.is_run():
            raise RunError(f"{p} is not a run folder (no {self.CONFIG}); --overwrite refuses it")

    def untouched(self) -> bool:
        """Whether the run has stored no episode and published no checkpoint (nothing to resume
        from or look at: what a run refused at start leaves)."""
        shards = self.trajectories.glob("shard-*.parquet") if self.trajectories.is_dir() else ()
        if any(True for _ in shards):
            return False
        return not (self.checkpoints.is_dir() and any(self.checkpoints.iterdir()))

    def start_new(self, overwrite: bool = False) -> RunDir:
        """Create the folder for a new run and lock it; ``overwrite`` deletes a previous run
        there first (under the lock, so never a folder another process is using)."""
        self.check_new(overwrite)
        try:  # exclusive: of two runs starting together, only one gets a new folder
            self.path.mkdir(parents=True, exist_ok=self.path.is_dir())
        except FileExistsError:
            raise RunError(f"run folder {self.path} was just created by another run") from None
        self.lock()
        if not overwrite:
            try:
                self.check_new()  # still empty now that we hold it
            except RunError:
                self.unlock()
                raise
        if overwrite:
            for entry in self.path.iterdir():
                if entry.name == LOCK_NAME:
                    continue
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
        return self.create()

    # -- the lock -----------------------------------------------------------------------------
    @property
    def locked(self) -> bool:
        return self._lock is not None and self._lock.held

    def lock(self) -> RunDir:
        """Hold the folder's lock until `unlock` (or the process ends); `RunError` when another
        process holds it."""
        if not self.locked:
            if not self.path.is_dir():
                raise RunError(f"run folder {self.path} does not exist")
            self._lock = RunLock(self.path).acquire()
        return self

    def unlock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    # -- config -------------------------------------------------------------------------------
    def save_config(self, config: Any) -> Path:
        """Write the resolved config (secrets redacted) as ``config.yaml``, and the code's
        provenance beside it (``provenance.json``)."""
        from devicerl.config import save_config
        from devicerl.runtime.runs.provenance import FILE, provenance

        save_config(config, self.config_path)
        self.path.mkdir(parents=True, exist_ok=True)
        write_json(self.path / FILE, provenance())
        return self.config_path

    def provenance(self) -> dict[str, Any]:
        """The saved ``provenance.json`` (empty when the run predates it)."""
        import json

        from devicerl.runtime.runs.provenance import FILE

        path = self.path / FILE
        if not (path.exists() or path.is_symlink()):
            return {}
        text = read_text(path, 1 << 20, within=self.path, what="provenance file")
        try:
            data = json.loads(text)
        except ValueError as e:
            raise DataError(f"{path} is not JSON: {e}") from None
        return data if isinstance(data, dict) else {}

    def load_config(self, cls: type[T], overrides: list[str] | None = None) -> T:
        """The saved config (for resuming), with optional dotted overrides on top.

        Redacted secrets fall back to their defaults (secrets come from the environment), so
        a resumed run never uses the redaction marker as a password.
        """
        from devicerl.config import apply_overrides, from_dict, read_yaml

        data = _drop_redacted(read_yaml(self.config_path))
        upgrade = getattr(cls, "upgrade_saved", None)  # an older version's layout, if any
        if upgrade is not None:
            data = upgrade(data)
        try:  # the saved config alone first: an override's own error names its key
            from_dict(cls, data)
        except ConfigError as e:
            if "unknown config key" not in str(e):
                raise
            raise ConfigError(
                f"{self.config_path}: {e} (not an option of this version, nor one it knows "
                "how to carry over, docs/training.md#options-removed: delete that line to resume)"
            ) from None
        return from_dict(cls, apply_overrides(data, overrides or []))

    # -- data and logs ------------------------------------------------------------------------
    def store(self, *, skip_bad: bool = False) -> TrajectoryStore:
        from devicerl.data.store import TrajectoryStore

        return TrajectoryStore(self.trajectories, skip_bad=skip_bad)

    def writer(self, **kwargs: Any) -> TrajectoryWriter:
        """A `TrajectoryWriter` into this run's store (kwargs as for the writer)."""
        from devicerl.data.store import TrajectoryWriter

        return TrajectoryWriter(self.trajectories, **kwargs)

    def metrics_logger(
        self, config: LoggingConfig | None = None, run_config: Any = None
    ) -> MetricsLogger:
        from devicerl.runtime.runs.metrics import MetricsLogger

        return MetricsLogger(self.path, config, run_config=run_config)

    def read_metrics(self) -> list[dict[str, Any]]:
        from devicerl.runtime.runs.metrics import read_metrics

        path = self.metrics_path
        return read_metrics(path) if path.exists() or path.is_symlink() else []

    # -- checkpoints --------------------------------------------------------------------------
    def checkpoint_manager(self, keep: int = 3) -> CheckpointManager:
        """The run's `CheckpointManager` (``checkpoints/iter-N/`` + ``latest``)."""
        from devicerl.runtime.runs.checkpoint import CheckpointManager

        return CheckpointManager(self.checkpoints, keep=keep)


def _drop_redacted(data: dict[str, Any]) -> dict[str, Any]:
    from devicerl.config import REDACTED

    return {
        k: _drop_redacted(v) if isinstance(v, dict) else v for k, v in data.items() if v != REDACTED
    }


def reserve_run_path(prefix: str, root: str | Path = "runs") -> Path:
    """Create and return a new empty ``root/<prefix>-<YYYYmmdd-HHMMSS>`` folder (suffixed
    ``-2``, ``-3`` ... when taken): default names never meet an earlier or concurrent run."""
    base = Path(root) / f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}"
    base.parent.mkdir(parents=True, exist_ok=True)
    path, n = base, 1
    while True:
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n += 1
            path = base.with_name(f"{base.name}-{n}")


def find_store(path: str | Path) -> Path:
    """The store folder for ``path``: a run folder's ``trajectories/`` or a bare store folder."""
    p = Path(path)
    run = RunDir(p)
    if run.trajectories.is_dir():
        return run.trajectories
    return p
