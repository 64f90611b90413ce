"""Where a run's numbers come from: the code (git commit, uncommitted changes), the packages.

Every run folder gets ``provenance.json`` beside its resolved ``config.yaml``. The benchmark
harness (``benchmarks/harness``) reuses a finished run only when its `code_identity` (commit +
a hash of the uncommitted diff) matches the running code's, unless told to accept another
commit (then it records that). The commit is the one of the git checkout the imported package
lies in (``git rev-parse`` from the package's folder); a package installed from a wheel has
none, and its commit is recorded as ``unknown``. Computed once per process: the code a process
imported does not change when commits land while it runs.
"""

from __future__ import annotations

import functools
import hashlib
import platform
import subprocess
import sys
from importlib import metadata, resources
from pathlib import Path
from typing import Any

#: Distributions whose versions can change a learning result.
PACKAGES = ("devicerl", "torch", "numpy", "playwright", "miniwob", "pyarrow", "gymnasium")
FILE = "provenance.json"
#: What counts as code (git pathspecs; the shipped setups are in the package): benchmark result
#: files are written by runs, not code.
CODE = ("devicerl", "benchmarks", ":(exclude)benchmarks/results")
#: The commit recorded when the package does not run from a git checkout (a wheel install).
UNKNOWN = "unknown"


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=20, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def uncommitted(root: Path) -> tuple[bool | None, str | None]:
    """Whether the code under ``root`` differs from its commit, and a hash of the difference:
    changes to tracked files and new untracked files under `CODE` (result files written by
    benchmarks are not code). ``(None, None)`` outside a git checkout."""
    diff = _git(["diff", "HEAD", "--", *CODE], root)
    new = _git(["ls-files", "--others", "--exclude-standard", "--", *CODE], root)
    if diff is None or new is None:
        return None, None
    if not diff and not new:
        return False, None
    h = hashlib.sha256(diff.encode())
    for name in sorted(new.splitlines()):
        h.update(name.encode() + b"\0" + (root / name).read_bytes())
    return True, h.hexdigest()[:16]


def checkout(package: Path) -> Path | None:
    """The root of the git checkout whose ``devicerl/`` is the `package` folder, else None (an
    installed wheel: a checkout that merely contains the environment does not count)."""
    top = _git(["rev-parse", "--show-toplevel"], package)
    if top is None:
        return None
    root = Path(top.strip())
    return root if (root / package.name).resolve() == package.resolve() else None


@functools.lru_cache(maxsize=1)
def provenance() -> dict[str, Any]:
    """git commit, dirty flag, a hash of the uncommitted code, Python and package versions."""
    root = checkout(Path(str(resources.files(__name__.partition(".")[0]))))
    commit = _git(["rev-parse", "HEAD"], root) if root is not None else None
    dirty, sha = uncommitted(root) if root is not None else (None, None)
    return {
        "git_commit": commit.strip() if commit else UNKNOWN,
        "git_dirty": dirty,
        "git_diff_sha256": sha,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": _versions(),
    }


def code_identity(record: dict[str, Any]) -> tuple[Any, Any]:
    """What must match for two runs to come from the same code: commit and uncommitted diff
    (package versions are recorded for the reader, not compared)."""
    return (record.get("git_commit"), record.get("git_diff_sha256"))
