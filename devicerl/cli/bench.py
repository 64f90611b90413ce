"""``devicerl bench [NAME [ARGS...]]``: run a benchmark script from ``benchmarks/`` by name.

Without a name, lists the benchmarks with their one-line descriptions. Arguments after the
name go to the script unchanged (``devicerl bench store_codec --quick --json out.json``). The
benchmarks are part of the repository, not of the installed package: the command runs from a
checkout (``./benchmarks``), or is told where they are (``--dir``, ``$DEVICERL_BENCHMARKS``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="run a benchmark from benchmarks/ by name (list them without a name)",
        description="Run benchmarks/NAME.py with the remaining arguments (e.g. --quick, "
        "--json PATH); without NAME, list the benchmarks.",
    )
    p.add_argument("name", nargs="?", default=None, help="benchmark name (file name without .py)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the benchmark")
    p.add_argument(
        "--dir",
        default=None,
        help="benchmarks folder (default: $DEVICERL_BENCHMARKS, else ./benchmarks)",
    )
    p.set_defaults(func=run)


def benchmarks_dir(explicit: str | None = None) -> Path:
    """Where the benchmark scripts are: ``--dir``, else ``$DEVICERL_BENCHMARKS``, else
    ``./benchmarks``; a folder named by the first two that is not one is refused, not passed
    over."""
    from devicerl.errors import ConfigError

    env = os.environ.get("DEVICERL_BENCHMARKS")
    for what, c in (("--dir", explicit), ("$DEVICERL_BENCHMARKS", env)):
        if c is not None:
            if not Path(c).is_dir():
                raise ConfigError(f"{what} {c}: not a folder")
            return Path(c)
    if Path("benchmarks").is_dir():
        return Path("benchmarks")
    raise ConfigError(
        "no benchmarks folder found: run from the repository's root, pass --dir or set "
        "DEVICERL_BENCHMARKS"
    )


def list_benchmarks(folder: Path) -> dict[str, str]:
    """Benchmark name -> first line of its docstring (read without importing it)."""
    import ast

    from devicerl.errors import DataError
    from devicerl.files import read_bytes

    out = {}
    for path in sorted(folder.glob("*.py")):
        if path.name.startswith("_"):
            continue
        try:  # bytes: Python's own rules for the source's encoding
            doc = ast.get_docstring(ast.parse(read_bytes(path, 1 << 22, what="benchmark"))) or ""
        except (SyntaxError, ValueError, DataError):  # not Python, not text, not a file
            doc = "(does not parse)"
        out[path.stem] = doc.strip().splitlines()[0] if doc.strip() else ""
    return out


def run(args: argparse.Namespace) -> int:
    import subprocess
    import sys

    from devicerl.errors import ConfigError

    folder = benchmarks_dir(args.dir)
    found = list_benchmarks(folder)
    if args.name is None:
        width = max((len(n) for n in found), default=0)
        print(f"benchmarks in {folder}:")
        for name, doc in found.items():
            print(f"  {name:<{width}}  {doc}")
        print("run one with: devicerl bench NAME [--quick] [--json PATH]")
        return 0
    name = args.name.removesuffix(".py")
    if name not in found:
        raise ConfigError(f"unknown benchmark {name!r} (available: {', '.join(found) or 'none'})")
    cmd = [sys.executable, str(folder / f"{name}.py"), *args.args]
    return subprocess.call(cmd)
