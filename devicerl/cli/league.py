"""``devicerl league RUN``: print a run's league table (policy x task success, snapshots,
teacher -> student, regression gate) from its saved league state."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "league",
        help="print the league table of a run (or of a saved league folder)",
        description="Load RUN/league/league.json (or DIR/league.json) with its weights, check "
        "every policy's weights hash, and print the league table: each policy's windowed "
        "success per task, snapshots and their sources, teacher -> student edges and the "
        "regression gate. See docs/league.md.",
    )
    p.add_argument("run_dir", metavar="RUN", help="a run folder or a saved league folder")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from devicerl.errors import DataError
    from devicerl.league.persist import STATE, load_league
    from devicerl.league.table import league_table

    root = Path(args.run_dir)
    folder = root / "league" if (root / "league" / STATE).exists() else root
    if not (folder / STATE).exists():
        raise DataError(f"{root}: no league state ({STATE} here or in league/)")
    league, pbt = load_league(folder)
    print(league_table(league))
    if pbt is not None:
        print(f"pbt: {', '.join(pbt.members)}")
    return 0
