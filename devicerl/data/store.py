"""Append-only trajectory store: a folder of Parquet shards (layout in `devicerl.data.schema`).

- `TrajectoryWriter(folder).append(trajectory)` buffers finished episodes and writes them as a
  new shard every ``flush_every`` episodes (default 1) or once ``flush_interval_s`` has passed,
  atomically (temp file, fsync, rename). A crash loses only episodes not yet flushed; a reader
  never sees a half-written shard under a real name. Several writers (processes, hosts) can share
  a folder: shard names carry a per-writer id.
- `TrajectoryStore(folder)` reads: `iter_trajectories` (lazy, filter by task / outcome),
  `load` (by episode id), `index` (episode metadata, no pixels), `step_table` (every row, for
  exporters such as `devicerl.data.hf.to_hf_dataset`), `compact`.
  A corrupt, partial or foreign shard raises `DataError` naming the file; ``skip_bad=True``
  logs a warning and goes on with the other shards.
- Content hashes: before a shard is published its size and sha256 go to its writer's
  ``manifest-<writer id>.jsonl``; a reader checks each shard against it once (per store
  object) before using it, so same-size corruption (a flipped byte in a screenshot) is found,
  not decoded into wrong data. Shards written before manifests existed are read unchecked.
- The index: beside the manifest each writer keeps ``index-<writer id>.jsonl``, one line per
  shard (its name, size and its episodes' columns), written before the shard is published, so
  `index` lists a large store's episodes from these lines instead of opening every shard
  (shards without a line, from older writers, are read as before).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from devicerl.data.codec import DEFAULT_CODEC, check_codec
from devicerl.data.schema import (
    EPISODE_COLUMNS,
    LAYOUT,
    META_VERSION,
    SCHEMA,
    STORE_VERSION,
    table_to_trajectories,
    trajectories_table,
)
from devicerl.errors import DataError, PathError
from devicerl.files import file_sha256, inside, is_regular, read_bytes
from devicerl.records import Trajectory

logger = logging.getLogger(__name__)

SHARD_GLOB = "shard-*.parquet"
MANIFEST_GLOB = "manifest-*.jsonl"
INDEX_GLOB = "index-*.jsonl"
#: Bounds on what one shard may hold: its size on disk, and what it decodes to (its row groups'
#: uncompressed size, from its footer): a small file can claim any size.
MAX_SHARD_BYTES = 4 << 30
MAX_SHARD_DECODED = 8 << 30
MAX_MANIFEST_BYTES = 64 << 20
MAX_INDEX_BYTES = 256 << 20


def _append_line(path: Path, entry: dict[str, Any], fsync: bool) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")
        if fsync:
            f.flush()
            os.fsync(f.fileno())


def _write_atomic(table: pa.Table, path: Path, fsync: bool, writer_id: str) -> None:
    """Temp file, its hash into the writer's manifest and its episodes into the writer's
    index, then rename: every published shard is listed in both."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        pq.write_table(table, f, compression="zstd")
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    size = tmp.stat().st_size
    entry = {"shard": path.name, "size": size, "sha256": file_sha256(tmp)}
    _append_line(path.parent / f"manifest-{writer_id}.jsonl", entry, fsync)
    episodes = table.filter(_final_rows(table)).select(EPISODE_COLUMNS).to_pylist()
    entry = {"shard": path.name, "size": size, "version": STORE_VERSION, "episodes": episodes}
    _append_line(path.parent / f"index-{writer_id}.jsonl", entry, fsync)
    os.replace(tmp, path)
    if fsync:
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


#: `TrajectoryWriter.flush`'s marker to its thread: write what you gathered now.
_WRITE_NOW = object()


class TrajectoryWriter:
    """Appends finished trajectories to a store folder as small atomic shards. Thread-safe.

    With ``background=True`` a worker thread encodes and writes, so `append` costs the caller
    almost nothing (at most ``max_pending`` episodes wait; then `append` blocks). The thread
    gathers the episodes that arrive within ``gather_s`` of the first one waiting (up to
    ``max_pending``) into one shard: a shard's fixed costs (Parquet footer, hash, index and
    manifest lines, four fsyncs) are paid once per batch rather than once per episode, which
    on a 2-core machine is CPU taken from the devices. A crash loses no more than the batch
    being gathered and the queue; `flush` and `close` write at once. A write error is raised
    by the next `append`, `flush` or `close`.
    """

    def __init__(
        self,
        folder: str | Path,
        *,
        codec: str = DEFAULT_CODEC,
        flush_every: int = 1,
        flush_interval_s: float | None = 10.0,
        fsync: bool = True,
        background: bool = False,
        max_pending: int = 64,
        gather_s: float = 1.0,
    ) -> None:
        if flush_every < 1:
            raise ValueError(f"flush_every must be >= 1, got {flush_every}")
        if not 0 <= gather_s <= 60:
            raise ValueError(f"gather_s must be between 0 and 60 seconds, got {gather_s}")
        self.gather_s = gather_s
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.codec = check_codec(codec)
        self.flush_every = flush_every
        self.flush_interval_s = flush_interval_s
        self.fsync = fsync
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        self.writer_id = f"{stamp}-{uuid.uuid4().hex[:8]}"
        self._seq = 0
        self._buffer: list[Trajectory] = []
        self._first_buffered_at = 0.0
        self._lock = threading.Lock()
        self.episodes_written = 0
        self.shards_written: list[Path] = []
        self._error: BaseException | None = None
        self._queue: queue.Queue[Trajectory | object | None] | None = None
        if background:
            self._queue = queue.Queue(maxsize=max_pending)
            self._thread = threading.Thread(target=self._drain, name="trajectory-writer")
            self._thread.daemon = True
            self._thread.start()

    def append(self, trajectory: Trajectory) -> None:
        """Add a finished episode; a shard is written when the flush policy says so."""
        if not trajectory.is_complete:
            raise ValueError(f"{trajectory!r} is not finished (end_reason is unset)")
        self._raise_pending()
        if self._queue is not None:
            self._queue.put(trajectory)
        else:
            self._add(trajectory)

    def _add(self, *trajectories: Trajectory) -> None:
        """Buffer ``trajectories``; write a shard of the buffer when the flush policy says so
        (once for them all)."""
        with self._lock:
            if not self._buffer:
                self._first_buffered_at = time.monotonic()
            self._buffer.extend(trajectories)
            due = len(self._buffer) >= self.flush_every or (
                self.flush_interval_s is not None
                and time.monotonic() - self._first_buffered_at >= self.flush_interval_s
            )
            if due:
                self._flush_locked()

    def _drain(self) -> None:
        assert self._queue is not None
        while True:
            items = self._gather()
            episodes = [t for t in items if isinstance(t, Trajectory)]
            try:
                if self._error is None and episodes:
                    self._add(*episodes)
            except BaseException as e:  # surfaced to the caller by _raise_pending
                self._error = e
            finally:
                for _ in items:
                    self._queue.task_done()
            if items[-1] is None:
                return

    def _gather(self) -> list[Any]:
        """The next batch: the first item, then what arrives within ``gather_s`` of it (what
        already waits once that time is up), ending early at `close`'s None or `flush`'s
        marker, and at ``max_pending`` episodes."""
        waiting = self._queue
        assert waiting is not None
        items = [waiting.get()]
        deadline = time.monotonic() + self.gather_s
        while isinstance(items[-1], Trajectory) and len(items) < waiting.maxsize:
            left = deadline - time.monotonic()
            try:
                items.append(waiting.get(timeout=left) if left > 0 else waiting.get_nowait())
            except queue.Empty:
                break
        return items

    def _raise_pending(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def extend(self, trajectories: Iterable[Trajectory]) -> None:
        for t in trajectories:
            self.append(t)

    def flush(self) -> Path | None:
        """Write everything appended so far; returns the last shard written now (or None)."""
        if self._queue is not None and self._thread.is_alive():
            self._queue.put(_WRITE_NOW)  # the thread stops gathering
            self._queue.join()
        self._raise_pending()
        with self._lock:
            return self._flush_locked()

    def _flush_locked(self) -> Path | None:
        if not self._buffer:
            return None
        path = self.write_table(trajectories_table(self._buffer, self.codec))
        self.episodes_written += len(self._buffer)
        self._buffer = []
        return path

    def write_table(self, table: pa.Table) -> Path:
        """Write an already-built shard table as this writer's next shard, atomically."""
        path = self.folder / f"shard-{self.writer_id}-{self._seq:06d}.parquet"
        _write_atomic(table, path, self.fsync, self.writer_id)
        self._seq += 1
        self.shards_written.append(path)
        return path

    def close(self) -> None:
        """Write what is pending and stop the background thread (if any)."""
        if self._queue is not None and self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        self.flush()

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_file(path: Path) -> None:
    """A shard is a regular file inside its store folder (a FIFO, a device or a link out of
    the folder named like one is refused, never opened) of a bounded size."""
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):  # only a link can lead out (resolving costs: not always)
            inside(path.parent, path, what="trajectory shard")
            st = os.stat(path)
    except FileNotFoundError:
        raise DataError(f"trajectory shard {path} does not exist") from None
    except (OSError, PathError) as e:
        raise DataError(str(e) if isinstance(e, PathError) else f"{path}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise DataError(f"trajectory shard {path} is not a regular file: refused")
    if st.st_size > MAX_SHARD_BYTES:
        raise DataError(
            f"trajectory shard {path} is {st.st_size} bytes, more than {MAX_SHARD_BYTES}"
        )


def _open_shard(path: Path) -> pq.ParquetFile:
    """Open and check a shard; every failure is a DataError naming the file."""
    _check_file(path)
    try:
        pf = pq.ParquetFile(path)
        schema = pf.schema_arrow  # built anew on every access: take it once
        meta = schema.metadata or {}
        md = pf.metadata
        decoded = sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
    except FileNotFoundError:
        raise DataError(f"trajectory shard {path} does not exist") from None
    except Exception as e:
        raise DataError(f"corrupt or partial trajectory shard {path}: {e}") from None
    if decoded > MAX_SHARD_DECODED:
        raise DataError(
            f"trajectory shard {path} claims {decoded} bytes of data, more than "
            f"{MAX_SHARD_DECODED}: refused"
        )
    version = meta.get(META_VERSION)
    if version is None:
        raise DataError(f"{path} is not a devicerl trajectory shard (no store version)")
    if int(version) > STORE_VERSION:
        raise DataError(
            f"{path} has store version {int(version)}, newer than this devicerl "
            f"({STORE_VERSION}); upgrade devicerl to read it"
        )
    missing = sorted(LAYOUT.required - set(schema.names))
    if missing:
        raise DataError(f"trajectory shard {path} lacks columns {missing}")
    return pf


def _read(
    path: Path, columns: Sequence[str] | None = None, verify: Callable[[Path], None] | None = None
) -> pa.Table:
    pf = _open_shard(path)  # first: a foreign or newer shard is named as such
    if verify is not None:
        verify(path)
    wanted = list(columns) if columns is not None else SCHEMA.names
    present = set(pf.schema_arrow.names)
    try:
        table = pf.read(columns=[c for c in wanted if c in present])
    except Exception as e:
        raise DataError(f"corrupt or partial trajectory shard {path}: {e}") from None
    for name in wanted:  # an older shard lacks the columns added since: their defaults
        if name not in present:
            field = SCHEMA.field(name)
            table = table.append_column(field, pa.nulls(table.num_rows, field.type))
    return table.select(wanted)


class TrajectoryStore:
    """Reads a store folder written by `TrajectoryWriter` (and by several of them)."""

    def __init__(self, folder: str | Path, *, skip_bad: bool = False) -> None:
        self.folder = Path(folder)
        self.skip_bad = skip_bad
        self.bad_shards: dict[Path, str] = {}
        self._hashes: dict[str, tuple[int, str]] = {}
        self._manifests_seen: dict[str, int] = {}
        self._verified: set[tuple[str, int, int]] = set()

    def shards(self) -> list[Path]:
        """Shard files in write order (writer start time, then sequence)."""
        if not self.folder.is_dir():
            return []
        return sorted(self.folder.glob(SHARD_GLOB))

    def _load_manifests(self) -> None:
        for m in sorted(self.folder.glob(MANIFEST_GLOB)):
            if not is_regular(m, within=self.folder):
                logger.warning("ignoring %s: not a regular file of the store", m)
                continue
            size = m.stat().st_size
            if self._manifests_seen.get(m.name) == size:
                continue
            self._manifests_seen[m.name] = size
            try:
                data = read_bytes(m, MAX_MANIFEST_BYTES, within=self.folder, what="manifest")
            except DataError as e:
                logger.warning("ignoring manifest: %s", e)
                continue
            for line in data.decode("utf-8", errors="replace").splitlines():
                try:
                    e = json.loads(line)
                    self._hashes[str(e["shard"])] = (int(e["size"]), str(e["sha256"]))
                except (ValueError, KeyError, TypeError):
                    continue  # a torn last line (crash while appending); its shard is unlisted

    def verify(self, path: Path) -> None:
        """Raise `DataError` when the shard does not match its size and sha256 in the
        manifest (checked once per store object; unlisted shards pass unchecked)."""
        _check_file(path)
        try:
            st = path.stat()
        except FileNotFoundError:
            raise DataError(f"trajectory shard {path} does not exist") from None
        key = (path.name, st.st_size, st.st_mtime_ns)
        if key in self._verified:
            return
        if path.name not in self._hashes:
            self._load_manifests()
        expected = self._hashes.get(path.name)
        if expected is not None:
            if st.st_size != expected[0]:
                raise DataError(
                    f"corrupt or partial trajectory shard {path}: {st.st_size} bytes, its "
                    f"manifest says {expected[0]}"
                )
            if file_sha256(path) != expected[1]:
                raise DataError(
                    f"corrupt or partial trajectory shard {path}: content does not match the "
                    "sha256 in its manifest"
                )
        self._verified.add(key)

    def _check(self, path: Path) -> bool:
        _open_shard(path)
        self.verify(path)
        return True

    def _read(self, path: Path, columns: Sequence[str] | None = None) -> pa.Table:
        return _read(path, columns, self.verify)

    def _guard(self, path: Path, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except DataError as e:
            msg = str(e) if str(path) in str(e) else f"{path}: {e}"
            if not self.skip_bad:
                raise DataError(msg) from None
            if path not in self.bad_shards:
                logger.warning("skipping bad trajectory shard: %s", msg)
            self.bad_shards[path] = msg
            return None

    def _tables(
        self, columns: Sequence[str] | None = None, where: Callable[[pa.Table], Any] | None = None
    ) -> Iterator[tuple[Path, pa.Table]]:
        for path in self.shards():
            table = self._guard(path, lambda p=path: self._read(p, columns))
            if table is None:
                continue
            if where is not None:
                table = table.filter(where(table))
            yield path, table

    def iter_trajectories(
        self,
        *,
        task: str | Sequence[str] | None = None,
        success: bool | None = None,
        end_reason: str | Sequence[str] | None = None,
        screenshots: bool = True,
    ) -> Iterator[Trajectory]:
        """Trajectories one shard at a time, in write order, optionally filtered.

        ``screenshots=False`` skips reading and decoding pixels (much faster for text agents
        and statistics).
        """
        where = episode_filter(task, success, end_reason)
        columns = None if screenshots else [n for n in SCHEMA.names if n != "screenshot"]
        seen: set[str] = set()
        for path, table in self._tables(columns, where):
            trajs = self._guard(path, lambda t=table: list(table_to_trajectories(t, screenshots)))
            for traj in trajs or []:
                if traj.episode_id not in seen:  # a crash mid-compaction leaves duplicates
                    seen.add(traj.episode_id)
                    yield traj

    def __iter__(self) -> Iterator[Trajectory]:
        return self.iter_trajectories()

    def read_all(self, **filters: Any) -> list[Trajectory]:
        return list(self.iter_trajectories(**filters))

    def index(self, *, verify: bool = True) -> pa.Table:
        """One row per episode (episode columns plus ``shard``), without pixels or steps.

        A shard the writers' index files list (with its size) is not opened: its episodes come
        from its line. ``verify`` (the default) still checks each such shard against its
        manifest (size and sha256), so a corrupt shard's episodes are left out (or raise) as
        when reading; ``verify=False`` checks only that the shard is there with the listed
        size, so listing a large store reads no shard (what `devicerl view` needs: the
        episodes it shows are checked as it reads them). Unlisted shards are read."""
        listed = self._listed()
        parts: list[pa.Table] = []
        run: list[tuple[Path, list[dict[str, Any]]]] = []  # listed shards in a row
        for path in self.shards():
            entry = listed.get(path.name)
            usable = self._guard(
                path, lambda p=path, e=entry: e is not None and self._listed_ok(p, e[0], verify)
            )
            if usable is None:
                continue  # a bad shard (skipped and recorded)
            if usable:
                run.append((path, entry[1]))  # type: ignore[index]
                continue
            parts += self._from_lines(run) + self._index_read([path])
            run = []
        parts += self._from_lines(run)
        if not parts:
            return _INDEX_SCHEMA.empty_table()
        table = pa.concat_tables(parts)
        _, first = _unique_first(table.column("episode_id").to_pylist())
        return table.take(first)

    def _listed_ok(self, path: Path, size: int, verify: bool) -> bool:
        """Whether the listed ``size`` of ``path`` can stand for reading it (raises
        `DataError` where reading would)."""
        if not verify:
            try:
                return path.stat().st_size == size
            except OSError:
                return False
        self.verify(path)
        return path.name in self._hashes and self._hashes[path.name][0] == size

    def _from_lines(self, run: list[tuple[Path, list[dict[str, Any]]]]) -> list[pa.Table]:
        """The index part of listed shards, from their lines (read from the shards instead
        when the lines do not fit the columns)."""
        rows = [{**r, "shard": path.name} for path, listed in run for r in listed]
        if not rows:
            return []
        try:
            return [pa.Table.from_pylist(rows, schema=_INDEX_SCHEMA)]
        except (pa.ArrowException, TypeError, ValueError):
            logger.warning("store index lines of %s do not fit: reading the shards", self.folder)
            return self._index_read([path for path, _ in run])

    def _index_read(self, paths: list[Path]) -> list[pa.Table]:
        """The index part of ``paths``, read from the shards."""
        parts = []
        for path in paths:
            table = self._guard(path, lambda p=path: self._read(p, [*EPISODE_COLUMNS, "is_final"]))
            if table is None:
                continue
            table = table.filter(_final_rows(table)).drop(["is_final"])
            parts.append(table.append_column("shard", pa.array([path.name] * table.num_rows)))
        return parts

    def _listed(self) -> dict[str, tuple[int, list[dict[str, Any]]]]:
        """The writers' index lines by shard name: (size, episode rows). An unreadable file or
        a line that does not parse, or of another store version, lists nothing (its shards
        are read)."""
        out: dict[str, tuple[int, list[dict[str, Any]]]] = {}
        for f in sorted(self.folder.glob(INDEX_GLOB)):
            try:
                data = read_bytes(f, MAX_INDEX_BYTES, within=self.folder, what="store index")
            except DataError as e:
                logger.warning("ignoring store index: %s", e)
                continue
            for line in data.splitlines():
                try:
                    e = json.loads(line)
                    name, size, rows = str(e["shard"]), int(e["size"]), e["episodes"]
                    current = e["version"] == STORE_VERSION
                except (ValueError, KeyError, TypeError):
                    continue  # a torn last line (crash while appending): its shard is read
                if current and isinstance(rows, list) and all(isinstance(r, dict) for r in rows):
                    out[name] = (size, rows)
        return out

    def load(self, episode_ids: Sequence[str], screenshots: bool = True) -> list[Trajectory]:
        """Trajectories by id, in the order asked; unknown ids raise DataError."""
        found: dict[str, Trajectory] = {}
        for t in self.iter_load(episode_ids, screenshots=screenshots):
            found.setdefault(t.episode_id, t)
        return [found[e] for e in episode_ids if e in found]

    def iter_load(
        self,
        episode_ids: Sequence[str],
        *,
        screenshots: bool = True,
        index: pa.Table | None = None,
        newest_first: bool = False,
    ) -> Iterator[Trajectory]:
        """Trajectories by id, shard by shard (each shard read once, in name order), so a
        caller can stream many episodes without holding them all; ``index`` (from `index`)
        saves reading the episode columns again; ``newest_first``: in the reverse of the
        order they were written. Unknown ids raise DataError."""
        columns = None if screenshots else [n for n in SCHEMA.names if n != "screenshot"]
        for path, table in self._episode_tables(episode_ids, index, columns, newest_first):
            trajs = self._guard(path, lambda t=table: list(table_to_trajectories(t, screenshots)))
            yield from reversed(trajs or []) if newest_first else trajs or []

    def iter_stored_screens(
        self,
        episode_ids: Sequence[str],
        *,
        index: pa.Table | None = None,
        newest_first: bool = False,
    ) -> Iterator[tuple[Trajectory, list[bytes | None]]]:
        """`iter_load` without decoding a pixel: each trajectory (no screenshots) with its
        screenshots as stored, one per row (its steps', then its final observation's; None
        where none was stored; a row that repeats an earlier screen gets that row's bytes
        object), for a reader that shows them as they are (`devicerl view`)."""
        for path, table in self._episode_tables(episode_ids, index, None, newest_first):
            got = self._guard(path, lambda t=table: _with_stored_screens(t))
            yield from reversed(got or []) if newest_first else got or []

    def _episode_tables(
        self,
        episode_ids: Sequence[str],
        index: pa.Table | None,
        columns: Sequence[str] | None,
        newest_first: bool,
    ) -> Iterator[tuple[Path, pa.Table]]:
        """The rows of ``episode_ids``, a table per shard (bad shards skipped or raised)."""
        index = self.index() if index is None else index
        shard_of = dict(
            zip(index.column("episode_id").to_pylist(), index.column("shard").to_pylist())
        )
        missing = [e for e in episode_ids if e not in shard_of]
        if missing:
            raise DataError(f"episodes not in store {self.folder}: {missing[:5]}")
        by_shard: dict[str, list[str]] = {}
        for e in episode_ids:
            by_shard.setdefault(shard_of[e], []).append(e)
        for name in sorted(by_shard, reverse=newest_first):
            path = self.folder / name
            table = self._guard(path, lambda p=path: self._read(p, columns))
            if table is not None:
                wanted = pc.is_in(table.column("episode_id"), pa.array(by_shard[name]))
                yield path, table.filter(wanted)

    def __len__(self) -> int:
        return self.index().num_rows

    def step_table(self) -> pa.Table:
        """Every row of every shard as one Arrow table in the store's schema (episodes with all
        their steps and final rows, screenshots as stored); exporters read the store through it."""
        tables = [t.replace_schema_metadata(None) for _, t in self._tables()]
        return pa.concat_tables(tables) if tables else SCHEMA.empty_table()

    def compact(self, max_episodes: int = 512) -> list[Path]:
        """Merge shards into larger ones (fewer files to open); returns the new shards.

        Do not run while another process reads the folder. A crash in the middle leaves
        duplicates that readers drop, never a loss.
        """
        writer = TrajectoryWriter(self.folder, flush_every=max_episodes, flush_interval_s=None)
        old = self.shards()
        group: list[Path] = []
        count = 0
        for path in old:
            if self._guard(path, lambda p=path: self._check(p)) is None:
                continue
            group.append(path)
            count += int(pc.sum(_read(path, ["is_final"]).column("is_final")).as_py() or 0)
            if count >= max_episodes:
                _merge(writer, group)
                group, count = [], 0
        if len(group) > 1:
            _merge(writer, group)
        return writer.shards_written


def _merge(writer: TrajectoryWriter, paths: list[Path]) -> None:
    tables = [_read(p) for p in paths]
    meta = {META_VERSION: str(STORE_VERSION).encode()}
    writer.write_table(pa.concat_tables([t.replace_schema_metadata(meta) for t in tables]))
    for p in paths:
        p.unlink()


#: The columns of `TrajectoryStore.index`.
_INDEX_SCHEMA = pa.schema(
    [SCHEMA.field(n) for n in EPISODE_COLUMNS] + [pa.field("shard", pa.string())]
)


def _with_stored_screens(table: pa.Table) -> list[tuple[Trajectory, list[bytes | None]]]:
    """The trajectories of a shard table without pixels, each with its rows' stored
    screenshots (references to an earlier row resolved to that row's bytes)."""
    trajs = list(table_to_trajectories(table.drop(["screenshot"]), screenshots=False))
    shots, refs, steps, finals = (
        table.column(n).to_pylist()
        for n in ("screenshot", "screenshot_ref", "step_index", "is_final")
    )
    screens: list[list[bytes | None]] = []
    own: dict[int, bytes] = {}
    rows: list[bytes | None] = []
    for shot, ref, step, final in zip(shots, refs, steps, finals):
        if shot is not None:
            own[step] = shot
        rows.append(shot if shot is not None else own.get(ref) if ref is not None else None)
        if final:
            screens.append(rows)
            own, rows = {}, []
    return list(zip(trajs, screens))


def _final_rows(table: pa.Table) -> Any:
    return pc.equal(table.column("is_final"), True)


def _unique_first(ids: list[str]) -> tuple[set[str], list[int]]:
    seen: set[str] = set()
    first = []
    for i, e in enumerate(ids):
        if e not in seen:
            seen.add(e)
            first.append(i)
    return seen, first


def _as_list(v: str | Sequence[str]) -> list[str]:
    return [v] if isinstance(v, str) else list(v)


def episode_filter(
    task: str | Sequence[str] | None = None,
    success: bool | None = None,
    end_reason: str | Sequence[str] | None = None,
) -> Callable[[pa.Table], Any] | None:
    """A row mask function for tables with episode columns (None when nothing is filtered)."""
    if task is None and success is None and end_reason is None:
        return None

    def where(table: pa.Table) -> Any:
        mask = pa.array([True] * table.num_rows)
        if task is not None:
            mask = pc.and_(mask, pc.is_in(table.column("task"), pa.array(_as_list(task))))
        if success is not None:
            mask = pc.and_(mask, pc.equal(table.column("success"), success))
        if end_reason is not None:
            reasons = pa.array(_as_list(end_reason))
            mask = pc.and_(mask, pc.is_in(table.column("end_reason"), reasons))
        return pc.fill_null(mask, False)

    return where
