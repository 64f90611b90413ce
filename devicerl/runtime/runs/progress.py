"""`RateProgress`: a progress bar for long work that shows steps/s and success rate.

On a terminal it is a rich progress bar; elsewhere (CI logs, files) it prints one plain line
every ``log_every_s`` seconds and a last one at the end, so logs stay readable.

    with RateProgress("collect", total=200, unit="episodes") as bar:
        ...
        bar.update(1, steps=trajectory.length, successes=int(trajectory.success))
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


class RateProgress:
    """Counts units of work (episodes, updates), env steps and successes, and shows rates."""

    def __init__(
        self,
        description: str,
        total: int | None = None,
        *,
        unit: str = "episodes",
        stream: TextIO | None = None,
        log_every_s: float = 30.0,
        disable: bool = False,
    ) -> None:
        self.description = description
        self.total = total
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.log_every_s = log_every_s
        self.disable = disable
        self.completed = 0
        self.steps = 0
        self.successes = 0
        self.episodes = 0
        self.fields: dict[str, Any] = {}
        self._t0 = time.perf_counter()
        self._last_line = self._t0
        self._bar: Any = None
        self._task: Any = None

    # -- rates --------------------------------------------------------------------------------
    @property
    def elapsed_s(self) -> float:
        return time.perf_counter() - self._t0

    @property
    def steps_per_s(self) -> float:
        return self.steps / max(self.elapsed_s, 1e-9)

    @property
    def success_rate(self) -> float:
        """Successes per episode (per completed unit unless episodes are counted apart)."""
        n = self.episodes if self.episodes else self.completed
        return self.successes / n if n else 0.0

    def summary(self) -> str:
        total = f"/{self.total}" if self.total is not None else ""
        extra = "".join(f"  {k} {_fmt(v)}" for k, v in self.fields.items())
        return (
            f"{self.description}: {self.completed}{total} {self.unit}  {self.steps} steps  "
            f"{self.steps_per_s:.1f} steps/s  success {self.success_rate:.1%}  "
            f"{self.elapsed_s:.0f}s{extra}"
        )

    # -- updates ------------------------------------------------------------------------------
    def update(
        self, n: int = 1, *, steps: int = 0, successes: int = 0, episodes: int = 0, **fields: Any
    ) -> None:
        """Add ``n`` finished units, ``steps`` env steps and ``successes`` (out of ``episodes``
        when the unit is not episodes, e.g. env steps); extra named values (e.g.
        ``loss=0.3``) are shown as they are."""
        self.completed += n
        self.steps += steps
        self.successes += successes
        self.episodes += episodes
        self.fields.update(fields)
        if self.disable:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=self.completed, info=self._info())
        elif time.perf_counter() - self._last_line >= self.log_every_s:
            self._last_line = time.perf_counter()
            print(self.summary(), file=self.stream, flush=True)

    def _info(self) -> str:
        extra = "".join(f"  {k} {_fmt(v)}" for k, v in self.fields.items())
        return f"{self.steps_per_s:.1f} steps/s  success {self.success_rate:.1%}{extra}"

    # -- lifecycle ----------------------------------------------------------------------------
    def __enter__(self) -> RateProgress:
        self._t0 = self._last_line = time.perf_counter()
        if not self.disable and getattr(self.stream, "isatty", lambda: False)():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._bar = Progress(
                TextColumn(f"[bold]{self.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn(self.unit),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                console=Console(file=self.stream),
            )
            self._bar.start()
            self._task = self._bar.add_task(self.description, total=self.total, info="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        elif not self.disable:
            print(self.summary(), file=self.stream, flush=True)


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)
