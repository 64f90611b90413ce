"""Small, comparable summaries of what a setup did, and the comparison of two of them.

A parameter update is summarised per tensor by three numbers of its delta (after - before):
the sum, the sum of squares, and the dot product with a fixed random vector seeded from the
tensor's name (`zlib.crc32`), so a change of sign, scale or direction in any tensor shows,
while the fixture stays small. Numbers are stored as JSON floats (NaN as the string "nan").
"""

from __future__ import annotations

import contextlib
import math
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

import torch

#: Absolute tolerance for log-probs and every number; large sums also get this relative one.
ATOL = 1e-6
RTOL = 1e-6


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run on one torch thread, as the trainer does (`set_torch_threads`): reductions split
    over several threads may round differently."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def snapshot(named: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A copy of each tensor (float64), to diff against after an update."""
    return {k: v.detach().to("cpu", torch.float64, copy=True) for k, v in named.items()}


def probe(name: str, shape: torch.Size) -> torch.Tensor:
    """The fixed random vector of tensor ``name`` (standard normal, float64)."""
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    return torch.randn(shape, generator=g, dtype=torch.float64)


def delta_summary(
    before: Mapping[str, torch.Tensor], after: Mapping[str, torch.Tensor]
) -> dict[str, list[float]]:
    """Per tensor: [sum, sum of squares, dot with its probe] of ``after - before``."""
    out = {}
    for name in sorted(before):
        d = after[name].detach().to("cpu", torch.float64) - before[name]
        out[name] = [float(d.sum()), float((d * d).sum()), float((d * probe(name, d.shape)).sum())]
    return out


def jsonable(x: Any) -> Any:
    """``x`` with floats JSON can hold (NaN and infinities as strings) and tuples as lists."""
    if isinstance(x, float):
        return x if math.isfinite(x) else str(x)
    if isinstance(x, Mapping):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    return x


def _number(x: Any) -> float | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, float)):
        return float(x)
    if x in ("nan", "inf", "-inf"):
        return float(x)
    return None


def close(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= ATOL + RTOL * abs(b)


def differences(got: Any, want: Any, path: str = "", limit: int = 20) -> list[str]:
    """Where ``got`` differs from ``want`` (both as `jsonable` makes them): one line per
    difference, naming the path and the values (numbers within `ATOL` + `RTOL` x |want| are
    equal), at most ``limit`` lines plus a count of the rest."""
    out: list[str] = []
    _diff(got, want, path or "$", out)
    if len(out) > limit:
        return [*out[:limit], f"... and {len(out) - limit} more differences"]
    return out


def _diff(got: Any, want: Any, path: str, out: list[str]) -> None:
    g, w = _number(got), _number(want)
    if g is not None and w is not None:
        if not close(g, w):
            out.append(f"{path}: {g!r} != recorded {w!r} (moved by {g - w:+.3g})")
        return
    if isinstance(want, Mapping) and isinstance(got, Mapping):
        for k in sorted(set(want) | set(got)):
            if k not in got:
                out.append(f"{path}.{k}: missing (recorded {_short(want[k])})")
            elif k not in want:
                out.append(f"{path}.{k}: not recorded (got {_short(got[k])})")
            else:
                _diff(got[k], want[k], f"{path}.{k}", out)
        return
    if isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            out.append(f"{path}: {len(got)} items != recorded {len(want)}")
        for i, (a, b) in enumerate(zip(got, want)):
            _diff(a, b, f"{path}[{i}]", out)
        return
    if got != want:
        out.append(f"{path}: {_short(got)} != recorded {_short(want)}")


def _short(x: Any, n: int = 120) -> str:
    text = repr(x)
    return text if len(text) <= n else text[: n - 3] + "..."
