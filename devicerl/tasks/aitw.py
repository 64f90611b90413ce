"""AitW instruction lists (one instruction per line), loaded from a path.

The lists are not shipped with devicerl; point to them (DigiRL's general_*.txt and
webshop_*.txt). `overlap` reports instructions that occur in both a train and a test list: in the
reference data every General test instruction is also a train instruction.
"""

from __future__ import annotations

from pathlib import Path

from devicerl.errors import TaskError
from devicerl.files import read_text
from devicerl.tasks.base import Task

#: Step budgets used by DigiRL: 10 for General, 20 for Web Shopping.
DEFAULT_MAX_STEPS = {"general": 10, "webshop": 20}
#: The largest instruction list read (DigiRL's are a few hundred KB).
MAX_LIST_BYTES = 64 << 20


def load_instruction_list(
    path: str | Path, suite: str | None = None, max_steps: int | None = None, env: str = "android"
) -> list[Task]:
    """Tasks named ``<suite>/<index>`` from a file with one instruction per line."""
    p = Path(path)
    lines = read_text(p, MAX_LIST_BYTES, what="instruction list", error=TaskError).splitlines()
    stem = p.stem
    suite = suite or f"aitw/{stem}"
    family = stem.split("_", 1)[0]
    steps = max_steps or DEFAULT_MAX_STEPS.get(family, 10)
    instructions = [line.strip() for line in lines if line.strip()]
    if not instructions:
        raise TaskError(f"instruction list {p} is empty")
    width = max(4, len(str(len(instructions))))
    return [
        Task(f"{suite}/{i:0{width}d}", instruction=text, max_steps=steps, env=env)
        for i, text in enumerate(instructions)
    ]


def overlap(train: list[Task], test: list[Task]) -> list[str]:
    """Instructions of ``test`` that also occur in ``train`` (case- and space-insensitive)."""
    seen = {" ".join((t.instruction or "").lower().split()) for t in train}
    return [
        t.instruction or "" for t in test if " ".join((t.instruction or "").lower().split()) in seen
    ]
