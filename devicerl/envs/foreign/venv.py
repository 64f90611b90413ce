"""Virtual environments for foreign devices, built once and cached outside the repository.

A device whose packages conflict with ours (BrowserGym pins ``playwright==1.44``; we resolve a
newer one) runs in an environment of its own. `ensure_env` builds it from a list of
requirements with the standard library's ``venv`` and pip, under
``$DEVICERL_ENV_CACHE`` (default ``~/.cache/devicerl/envs``) in a folder named by the hash of
the requirements and of the base interpreter's version, and returns its interpreter. A second
call (any process) finds the finished environment and returns at once; concurrent callers wait
on a file lock; a build that died half-way (no ``devicerl-env.json`` written last) is removed
and built again. Nothing here imports the packages it installs.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from devicerl.errors import ConfigError

#: Written last into a finished environment: its requirements and how long the build took.
MARKER = "devicerl-env.json"


def cache_root() -> Path:
    """Where environments are kept: ``$DEVICERL_ENV_CACHE`` or ``~/.cache/devicerl/envs``."""
    root = os.environ.get("DEVICERL_ENV_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "devicerl" / "envs"


def _base_version(python: str) -> str:
    out = subprocess.run(
        [python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if out.returncode != 0:
        raise ConfigError(f"cannot run the base interpreter {python!r}: {out.stderr.strip()}")
    return out.stdout.strip()


def env_key(requirements: Sequence[str], base_version: str) -> str:
    """The cache folder's name: a hash of the (sorted) requirements and the Python version."""
    text = "\n".join([f"python=={base_version}", *sorted(r.strip() for r in requirements)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def env_python(folder: Path) -> Path:
    return folder / "bin" / "python"


def find_env(requirements: Sequence[str], base: str | None = None) -> Path | None:
    """The interpreter of the finished environment for ``requirements``, or None."""
    base = base or sys.executable
    folder = cache_root() / env_key(requirements, _base_version(base))
    return env_python(folder) if (folder / MARKER).is_file() else None


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_env(
    requirements: Sequence[str], base: str | None = None, timeout_s: float = 1800.0
) -> Path:
    """The interpreter of an environment with ``requirements`` installed, built on first use.

    ``base`` is the interpreter the environment is made from (default: this one). Raises
    `ConfigError` naming pip's last error line when the build fails.
    """
    if not requirements:
        raise ConfigError("a foreign environment needs at least one requirement")
    base = base or sys.executable
    folder = cache_root() / env_key(requirements, _base_version(base))
    with _locked(folder.with_name(folder.name + ".lock")):
        if (folder / MARKER).is_file():
            return env_python(folder)
        if folder.exists():  # a build that did not finish
            shutil.rmtree(folder)
        t0 = time.monotonic()
        try:
            _build(folder, list(requirements), base, timeout_s)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        record = {
            "requirements": sorted(requirements),
            "base": base,
            "build_s": round(time.monotonic() - t0, 1),
        }
        (folder / MARKER).write_text(json.dumps(record, indent=1) + "\n")
    return env_python(folder)


def _build(folder: Path, requirements: list[str], base: str, timeout_s: float) -> None:
    steps = [
        [base, "-m", "venv", str(folder)],
        [str(env_python(folder)), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--no-input", *requirements],
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    for cmd in steps:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
        if out.returncode != 0:
            lines = [ln for ln in (out.stderr or out.stdout).splitlines() if ln.strip()]
            last = lines[-1] if lines else f"exit code {out.returncode}"
            raise ConfigError(f"building the environment {folder} failed: {last}")


def build_record(python: Path) -> dict:
    """What `ensure_env` wrote about the environment of ``python`` (requirements, build time)."""
    return json.loads((python.parent.parent / MARKER).read_text())
