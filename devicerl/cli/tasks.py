"""``devicerl tasks``: list task suites, splits and tasks."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tasks", help="list task suites, splits and tasks")
    p.add_argument(
        "spec",
        nargs="?",
        default=None,
        help="a suite, split, glob (miniwob/click-*) or instruction-list path; "
        "without it, list suites and splits",
    )
    p.add_argument("--count", action="store_true", help="print only the number of tasks")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from devicerl import tasks

    if args.spec is None:
        print("suites:")
        for name in tasks.suites():
            print(f"  {name}")
        if tasks.splits():
            print("splits:")
            for name, patterns in sorted(tasks.splits().items()):
                print(f"  {name}: {', '.join(patterns)}")
        return 0
    found = tasks.resolve(args.spec)
    if args.count:
        print(len(found))
        return 0
    for t in found:
        extra = f"  {t.instruction!r}" if t.instruction else ""
        print(f"{t.name}  max_steps={t.max_steps}{extra}")
    return 0
