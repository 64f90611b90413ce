"""The package's walls: every module imports only layers below its own, as the README's
"Layering" line says; inside ``devicerl/runtime`` every part (module or sub-package) imports only
parts below it in `RUNTIME_ORDER`; and no modules import each other in a circle. Imports inside
functions count (a lazy import is still a dependency), and so do ``TYPE_CHECKING`` imports (a
type a module names is a dependency of its design, even when it is never imported at run
time)."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "devicerl"
#: The rooms of ``devicerl/runtime`` (its sub-packages, one job each), lowest first: a room
#: imports only rooms before it. The one place that says how runtime is layered.
RUNTIME_ORDER = (
    "runs",  # the run folder, its lock, checkpoints, provenance, metrics, progress, stop
    "acting",  # planning, exploration, the collector and its thread, acting copies
    "setup",  # the run config, preflight, learner wiring
    "distributed",  # transport: data-parallel learners
    "cluster",  # transport: Ray rollout groups
    "loop",  # the trainer, its population, observers, evaluation, league
    "reports",  # the viewer and plots
)


def readme_layers() -> dict[str, int]:
    """Layer name -> rank, from the README paragraph after ``Layering (...):`` (``a`` <- ``b``)."""
    text = (ROOT / "README.md").read_text()
    match = re.search(r"^Layering \(.*?\):\n(.*?)\n\n", text, re.M | re.S)
    assert match, "README.md has no 'Layering ...:' paragraph"
    ranks: dict[str, int] = {}
    for rank, group in enumerate(match.group(1).split("<-")):
        for name in re.findall(r"`([^`]+)`", group):
            ranks[name] = rank
    return ranks


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The devicerl modules ``name`` imports anywhere in its body: at the top, inside
    functions, and under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(), str(path))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                prefix = package[: len(package) - node.level + 1]
                base = ".".join([*prefix, *([node.module] if node.module else [])])
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        else:
            continue
        for target in targets:
            while target not in known and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in known and target != name:
                out.add(target)
    return out


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


@functools.cache
def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported(name, path, known) for name, path in known.items()}


def test_every_module_belongs_to_a_readme_layer() -> None:
    ranks = readme_layers()
    missing = sorted({layer_of(m) for m in modules()} - set(ranks))
    assert not missing, f"README 'Layering' line does not place: {missing}"


def test_modules_import_only_layers_below_their_own() -> None:
    ranks = readme_layers()
    bad = []
    for module, targets in graph().items():
        for target in targets:
            a, b = layer_of(module), layer_of(target)
            if a != b and ranks[b] >= ranks[a]:
                bad.append(f"{module} imports {target} ({b} is not below {a})")
    assert not bad, "layering violations:\n" + "\n".join(sorted(bad))


def runtime_part(module: str) -> str | None:
    """The room of ``devicerl.runtime`` a module belongs to (None outside runtime and for the
    package's own ``__init__``)."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["devicerl", "runtime"] and len(parts) > 2 else None


def runtime_back_edges() -> set[tuple[str, str]]:
    """Imports between runtime's parts that do not point down `RUNTIME_ORDER`."""
    rank = {part: i for i, part in enumerate(RUNTIME_ORDER)}
    out = set()
    for module, targets in graph().items():
        a = runtime_part(module)
        for target in targets:
            b = runtime_part(target)
            if a is not None and b is not None and a != b and rank[b] >= rank[a]:
                out.add((module, target))
    return out


def test_every_runtime_part_has_a_place_in_the_order() -> None:
    parts = {p for p in map(runtime_part, modules()) if p is not None}
    order = set(RUNTIME_ORDER)
    assert not parts - order, f"RUNTIME_ORDER lacks {sorted(parts - order)}"
    assert not order - parts, f"RUNTIME_ORDER names parts that do not exist: {order - parts}"
    assert len(set(RUNTIME_ORDER)) == len(RUNTIME_ORDER)


def test_runtime_parts_import_only_parts_below_their_own() -> None:
    found = sorted(f"{a} imports {b}" for a, b in runtime_back_edges())
    assert not found, "imports up RUNTIME_ORDER:\n" + "\n".join(found)


def test_the_product_never_imports_the_test_doubles() -> None:
    users = [
        m for m, t in graph().items() if layer_of(m) != "testing" and "testing" in map(layer_of, t)
    ]
    assert not users, f"product modules import devicerl.testing: {users}"


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles() -> None:
    assert cycles(graph()) == []


def test_the_checks_can_fail(tmp_path) -> None:
    """The cycle finder and the import reader see what they must (a test of the test)."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert "devicerl.pool.workers.ray" in graph()["devicerl.pool.pool"]  # a lazy import is seen
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from devicerl.runtime.loop.trainer import Trainer\n"
    )
    seen = imported("devicerl.runtime.runs.stop", source, modules())
    assert seen == {"devicerl.runtime.loop.trainer"}  # a type-checking import is an edge
    assert runtime_part("devicerl.runtime.cluster.fleet") == "cluster"
    assert runtime_part("devicerl.runtime") is None and runtime_part("devicerl.pool.pool") is None


def test_every_imported_name_exists() -> None:
    """A lazy ``from devicerl.x import y`` (or ``from harness.x import y`` in benchmarks) only
    fails when its function runs: check every one now, so a moved module or name cannot hide in
    a code path the tests do not take."""
    import importlib

    missing = []
    for path in [*PACKAGE.rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            if not node.module.startswith(("devicerl", "harness")):
                continue
            try:
                module = importlib.import_module(node.module)
            except ImportError as e:
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno}: {e}")
                continue
            for alias in node.names:
                if alias.name != "*" and not hasattr(module, alias.name):
                    try:
                        importlib.import_module(f"{node.module}.{alias.name}")
                    except ImportError:
                        missing.append(
                            f"{path.relative_to(ROOT)}:{node.lineno}: "
                            f"{node.module} has no {alias.name}"
                        )
    assert not missing, "\n".join(missing)
