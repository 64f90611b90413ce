"""Benchmark-only MiniWoB++ code: a scripted oracle (`oracle`) and a harness that runs the
official ``miniwob`` gymnasium env next to ours (`official`). Benchmarks import it by name
(``benchmarks/`` is first on ``sys.path`` when a script runs); tests through ``tests/conftest.py``.
"""
