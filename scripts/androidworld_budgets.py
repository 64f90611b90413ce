"""Writes ``devicerl/tasks/androidworld_budgets.py``: AndroidWorld's step budget per task type.

AndroidWorld gives each task ``int(10 * complexity)`` steps (``suite_utils._allocate_step_budget``)
and its server does not say what a task's complexity is, so this script reads it from the
source, without importing it (android_world needs its own environment): the task classes
``registry.py`` lists in ``TaskRegistry._TASKS``, each class's ``complexity`` class attribute
(inherited through its bases, in its module or the modules it imports), and for the
information-retrieval tasks the ``complexity`` field of ``proto/tasks.textproto``, which
``InformationRetrieval.__init__`` copies onto every instance.

    git clone https://github.com/google-research/android_world /tmp/android_world
    python scripts/androidworld_budgets.py /tmp/android_world          # rewrite the table
    python scripts/androidworld_budgets.py /tmp/android_world --check  # exit 1 if it differs
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "devicerl" / "tasks" / "androidworld_budgets.py"


class Source:
    """The modules of an android_world checkout, parsed on demand."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._trees: dict[str, ast.Module] = {}

    def tree(self, module: str) -> ast.Module:
        if module not in self._trees:
            path = self.root / (module.replace(".", "/") + ".py")
            self._trees[module] = ast.parse(path.read_text(), str(path))
        return self._trees[module]

    def imports(self, module: str) -> dict[str, str]:
        """Local name -> what it is (``package.module`` or ``package.module.Name``)."""
        out = {}
        for node in self.tree(module).body:
            if isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    out[a.asname or a.name] = f"{node.module}.{a.name}"
        return out

    def complexity(self, module: str, name: str) -> float | None:
        """A class's ``complexity`` class attribute, looked up through its bases."""
        cls = next(
            (n for n in self.tree(module).body if isinstance(n, ast.ClassDef) and n.name == name),
            None,
        )
        if cls is None:
            raise LookupError(f"class {name} not in {module}")
        for node in cls.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "complexity" for t in node.targets
            ):
                return ast.literal_eval(node.value)
        for base in cls.bases:
            found = self._base(module, base)
            if found is not None:
                value = self.complexity(*found)
                if value is not None:
                    return value
        return None

    def _base(self, module: str, base: ast.expr) -> tuple[str, str] | None:
        imports = self.imports(module)
        if isinstance(base, ast.Name):
            target = imports.get(base.id)
            if target is None:
                return module, base.id
            return target.rsplit(".", 1)[0], base.id
        if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name):
            target = imports.get(base.value.id)
            return (target, base.attr) if target else None
        return None


def registry_budgets(src: Source) -> dict[str, int]:
    module = "android_world.registry"
    imports = src.imports(module)
    registry = next(n for n in src.tree(module).body if isinstance(n, ast.ClassDef))
    listed = next(
        n.value
        for n in registry.body
        if isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "_TASKS" for t in n.targets)
    )
    out = {}
    for element in listed.elts:  # module.Class
        assert isinstance(element, ast.Attribute) and isinstance(element.value, ast.Name)
        complexity = src.complexity(imports[element.value.id], element.attr)
        if complexity is None or complexity <= 0:
            raise ValueError(f"{element.attr}: no usable complexity ({complexity})")
        out[element.attr] = int(10 * complexity)
    return out


def retrieval_budgets(root: Path) -> dict[str, int]:
    text = (
        root / "android_world/task_evals/information_retrieval/proto/tasks.textproto"
    ).read_text()
    out = {}
    for block in re.split(r"^tasks \{", text, flags=re.M)[1:]:
        name = re.search(r'^  name: "(\w+)"', block, re.M)
        complexity = re.search(r"^  complexity: (\d+)", block, re.M)
        assert name and complexity, block[:200]
        out[name.group(1)] = int(10 * int(complexity.group(1)))
    return out


def render(budgets: dict[str, int], commit: str) -> str:
    rows = "".join(f'    "{k}": {v},\n' for k, v in sorted(budgets.items()))
    return (
        '"""AndroidWorld\'s step budget per task type: ``int(10 * complexity)``, as its suite '
        "runner\ngives it, read from google-research/android_world at commit\n"
        f"{commit} by ``scripts/androidworld_budgets.py``\n(do not edit by hand).\n"
        '"""\n\n'
        "STEP_BUDGETS: dict[str, int] = {\n"
        f"{rows}"
        "}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="an android_world git checkout")
    parser.add_argument("--check", action="store_true", help="exit 1 when the table differs")
    args = parser.parse_args(argv)
    commit = subprocess.run(
        ["git", "-C", str(args.checkout), "rev-parse", "HEAD"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    budgets = {**registry_budgets(Source(args.checkout)), **retrieval_budgets(args.checkout)}
    text = render(budgets, commit)
    if args.check:
        same = OUT.read_text() == text
        print("up to date" if same else f"{OUT} differs from {args.checkout} at {commit}")
        return 0 if same else 1
    OUT.write_text(text)
    print(f"wrote {len(budgets)} budgets to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
