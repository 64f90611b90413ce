"""Makes the benchmark-only MiniWoB++ code (``benchmarks/miniwob_harness``: the oracle and the
official-env harness) importable by tests, by the name benchmark scripts use."""

import sys
from pathlib import Path

BENCHMARKS = str(Path(__file__).resolve().parents[1] / "benchmarks")
if BENCHMARKS not in sys.path:
    sys.path.append(BENCHMARKS)
