"""The benchmark harness: learning comparisons run as real training runs, and their reports.

Benchmark-only code, not part of the installed package: ``comparison`` runs each (system,
seed) as a `devicerl` training run from a shipped setup, reuses or continues runs of the same
config and code, and evaluates them; ``report`` turns the results into tables with intervals
across training seeds, curves, ``comparison.json`` and ``report.md``. Benchmarks import it by
name (``benchmarks/`` is first on ``sys.path`` when a script runs); tests through
``tests/conftest.py``.
"""
