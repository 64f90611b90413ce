"""Makes the benchmark-only modules (`benchmarks/miniwob_oracle.py`, `miniwob_official.py`)
importable by tests, the way benchmark scripts import each other (by module name)."""

import sys
from pathlib import Path

BENCHMARKS = str(Path(__file__).resolve().parents[1] / "benchmarks")
if BENCHMARKS not in sys.path:
    sys.path.append(BENCHMARKS)
