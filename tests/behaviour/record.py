"""Write the behaviour fixtures: ``python -m tests.behaviour.record [NAME ...]`` from the
repository root (every setup and league config without names); ``--stdout`` prints them as one
JSON object instead (what the test reads).

Every record runs in a child process whose numerics do not depend on the CPU
(`PORTABLE_NUMERICS`): torch's generic kernels (no AVX2 / AVX-512 paths), MKL in its
conditional-numerical-reproducibility mode, oneDNN held to SSE4.1, one thread. On the CPU's own
fastest kernels, an update's parameter deltas differ between processors by more than the
comparison's 1e-6 (float32 sums in another order, amplified by Adam on near-zero gradients),
so fixtures recorded on one machine failed on another.

Each fixture is one JSON file in ``tests/behaviour/fixtures/`` holding what
`tests.behaviour.builders.record_setup` or `tests.behaviour.league.record_league` returns, with
the git commit it was recorded at and whether the product code (``devicerl/``, ``configs/``,
the pre-trained agent) had uncommitted changes then. Refused (exit 2, nothing written) when
``devicerl`` is not imported from this checkout or a name is unknown.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

import devicerl

from .builders import PRETRAINED, ROOT, SETUPS, record_setup
from .league import LEAGUES, record_league

FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: Keys of a fixture that describe how it was made, not what the code did.
META = ("commit", "product_code_dirty", "torch", "python")
PRODUCT = ("devicerl", "configs", PRETRAINED)
#: Environment variables that make torch's CPU numerics the same on every x86-64 processor
#: (read when torch loads, so they are set for a child process).
PORTABLE_NUMERICS = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "SSE41",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


def portable() -> bool:
    return all(os.environ.get(k) == v for k, v in PORTABLE_NUMERICS.items())


def record_portably(wanted: list[str]) -> dict[str, dict[str, Any]]:
    """Each named fixture's record, made in a child process with `PORTABLE_NUMERICS`."""
    env = {**os.environ, **PORTABLE_NUMERICS}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "tests.behaviour.record", "--stdout", *wanted],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"recording {wanted} failed:\n{done.stdout}\n{done.stderr}")
    return json.loads(done.stdout)


def names() -> list[str]:
    return [*SETUPS, *LEAGUES]


def record(name: str) -> dict[str, Any]:
    return record_setup(name) if name in SETUPS else record_league(name)


def fixture_path(name: str) -> Path:
    return FIXTURES / f"{name}.json"


def load_fixture(name: str) -> dict[str, Any]:
    return json.loads(fixture_path(name).read_text(encoding="utf-8"))


def without_meta(fixture: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fixture.items() if k not in META}


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def provenance() -> dict[str, Any]:
    return {
        "commit": _git("rev-parse", "HEAD"),
        "product_code_dirty": bool(_git("status", "--porcelain", "--", *PRODUCT)),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def main(argv: list[str]) -> int:
    stdout = "--stdout" in argv
    wanted = [a for a in argv if a != "--stdout"] or names()
    unknown = [n for n in wanted if n not in names()]
    if unknown:
        print(f"record: unknown fixture {unknown[0]!r} (known: {', '.join(names())})")
        return 2
    package = Path(devicerl.__file__).resolve().parents[1]
    if package != ROOT:
        print(f"record: devicerl is imported from {package}, not {ROOT}: run from {ROOT}")
        return 2
    if stdout:
        if not portable():
            print("record: --stdout runs only with PORTABLE_NUMERICS set (record_portably)")
            return 2
        print(json.dumps({name: record(name) for name in wanted}, allow_nan=False))
        return 0
    meta = provenance()
    FIXTURES.mkdir(exist_ok=True)
    for name, got in record_portably(wanted).items():
        data = {**meta, **got}
        text = json.dumps(data, indent=1, sort_keys=True, allow_nan=False) + "\n"
        fixture_path(name).write_text(text, encoding="utf-8")
        print(f"{fixture_path(name).relative_to(ROOT)}: {len(text) / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
