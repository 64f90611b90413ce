"""Task suites and splits by name, with glob patterns.

``resolve("miniwob")`` gives a whole suite, ``resolve("miniwob/click-*")`` a glob over task
names, ``resolve("miniwob-dev")`` a named split, ``resolve("path/to/list.txt")`` an instruction
list (one instruction per line), ``resolve("path/to/suite.yaml")`` (or ``.jsonl``) the tasks a
suite file declares (`devicerl.tasks.custom`). Several specs may be joined with commas or given
as a list. Suites load lazily, so listing names never starts a browser or imports heavy packages.
"""

from __future__ import annotations

import fnmatch
import importlib
from collections.abc import Callable, Sequence
from pathlib import Path

from devicerl.errors import TaskError
from devicerl.tasks.base import Task

SuiteLoader = Callable[[], list[Task]]

_SUITES: dict[str, SuiteLoader | str] = {}
_SPLITS: dict[str, tuple[str, ...]] = {}
_CACHE: dict[str, list[Task]] = {}
#: Suites whose tasks need more than this machine's Python environment: what, as lines.
_NEEDS: dict[str, Callable[[], list[str]] | str] = {}


def register_suite(
    name: str, loader: SuiteLoader | str, needs: Callable[[], list[str]] | str | None = None
) -> None:
    """Register a suite. ``loader`` is a callable or a ``"module:function"`` string (lazy);
    ``needs`` (the same kinds) says, in lines, what its tasks need to run beyond devicerl
    (another environment, servers, variables) and whether this machine has it."""
    _SUITES[name] = loader
    _CACHE.pop(name, None)
    if needs is not None:
        _NEEDS[name] = needs


def suite_needs(name: str) -> list[str]:
    """What suite ``name`` needs to run (lines; [] when nothing beyond devicerl)."""
    needs = _NEEDS.get(name)
    if isinstance(needs, str):
        module, _, attr = needs.partition(":")
        needs = getattr(importlib.import_module(module), attr)
    return list(needs()) if needs is not None else []  # type: ignore[operator]


def register_split(name: str, patterns: Sequence[str]) -> None:
    """Register a named split: a list of task names or glob patterns."""
    _SPLITS[name] = tuple(patterns)


def suites() -> list[str]:
    return sorted(_SUITES)


def splits() -> dict[str, tuple[str, ...]]:
    return dict(_SPLITS)


def suite_tasks(name: str) -> list[Task]:
    """All tasks of a suite, loading it on first use."""
    if name not in _CACHE:
        loader = _SUITES.get(name)
        if loader is None:
            raise TaskError(f"unknown task suite {name!r}; known suites: {', '.join(suites())}")
        if isinstance(loader, str):
            module, _, attr = loader.partition(":")
            loader = getattr(importlib.import_module(module), attr)
        _CACHE[name] = list(loader())  # type: ignore[operator]
    return _CACHE[name]


def _resolve_one(spec: str) -> list[Task]:
    spec = spec.strip()
    if spec in _SPLITS:
        return resolve(list(_SPLITS[spec]))
    if spec in _SUITES:
        return suite_tasks(spec)
    if spec.lower().endswith((".yaml", ".yml", ".jsonl")):
        from devicerl.tasks.custom import load_suite

        return load_suite(spec)
    if spec.endswith(".txt") or Path(spec).is_file():
        from devicerl.tasks.aitw import load_instruction_list

        return load_instruction_list(spec)
    suite = spec.split("/", 1)[0]
    if suite not in _SUITES:
        raise TaskError(f"unknown task or suite {spec!r}; known suites: {', '.join(suites())}")
    tasks = [t for t in suite_tasks(suite) if fnmatch.fnmatchcase(t.name, spec)]
    if not tasks:
        raise TaskError(f"no task of suite {suite!r} matches {spec!r}")
    return tasks


def resolve(spec: str | Sequence[str]) -> list[Task]:
    """Tasks named by a spec (see module doc), in order, without duplicates."""
    specs = spec.split(",") if isinstance(spec, str) else list(spec)
    seen: dict[str, Task] = {}
    for s in specs:
        if s.strip():
            for t in _resolve_one(s):
                if seen.setdefault(t.name, t) != t:  # the same name, another task
                    raise TaskError(
                        f"task {t.name} is named twice with different definitions (in {s.strip()}"
                        " and before it): rename one, a run cannot tell them apart"
                    )
    if not seen:
        raise TaskError(f"task spec {spec!r} names no task")
    return list(seen.values())


def get(name: str) -> Task:
    """One task by exact name."""
    tasks = [t for t in resolve(name) if t.name == name]
    if not tasks:
        raise TaskError(f"unknown task {name!r}")
    return tasks[0]
