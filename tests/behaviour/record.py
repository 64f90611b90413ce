"""Write the behaviour fixtures: ``python -m tests.behaviour.record [NAME ...]`` from the
repository root (every setup and league config without names).

Each fixture is one JSON file in ``tests/behaviour/fixtures/`` holding what
`tests.behaviour.builders.record_setup` or `tests.behaviour.league.record_league` returns, with
the git commit it was recorded at and whether the product code (``devicerl/``, ``configs/``,
the pre-trained agent) had uncommitted changes then. Refused (exit 2, nothing written) when
``devicerl`` is not imported from this checkout or a name is unknown.
"""

from __future__ import annotations

import json
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
    wanted = argv or names()
    unknown = [n for n in wanted if n not in names()]
    if unknown:
        print(f"record: unknown fixture {unknown[0]!r} (known: {', '.join(names())})")
        return 2
    package = Path(devicerl.__file__).resolve().parents[1]
    if package != ROOT:
        print(f"record: devicerl is imported from {package}, not {ROOT}: run from {ROOT}")
        return 2
    meta = provenance()
    FIXTURES.mkdir(exist_ok=True)
    for name in wanted:
        data = {**meta, **record(name)}
        text = json.dumps(data, indent=1, sort_keys=True, allow_nan=False) + "\n"
        fixture_path(name).write_text(text, encoding="utf-8")
        print(f"{fixture_path(name).relative_to(ROOT)}: {len(text) / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
