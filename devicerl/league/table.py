"""`league_table`: the league as text (policy x task success, snapshots, teacher -> student),
for the run report and ``devicerl league RUN``."""

from __future__ import annotations

from devicerl.league.state import League


def _cell(rate: float | None, n: int) -> str:
    return "-" if rate is None else f"{rate:.2f} ({n})"


def league_table(league: League, tasks: list[str] | None = None) -> str:
    """One row per policy (snapshots marked ``*``, frozen ones ``f``), one column per task:
    windowed success and its episode count; then snapshots, teacher edges and the gate."""
    tasks = tasks if tasks is not None else league.success.tasks()
    header = ["policy", "kind", "version", "recent", *tasks]
    rows = []
    for name, m in league.members.items():
        kind = "snapshot*" if m.snapshot else ("train" if m.spec.trainable else "frozen f")
        rate, n = league.success.policy_rate(name)
        cells = [_cell(league.success.rate(name, t), league.success.count(name, t)) for t in tasks]
        rows.append([name, kind, str(m.policy.version), _cell(rate, n), *cells])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [f"league: iteration {league.iteration}, {len(league.members)} policies"]
    for row in [header, *rows]:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    snaps = [(n, m) for n, m in league.members.items() if m.snapshot]
    if snaps:
        lines.append("snapshots: " + ", ".join(f"{n} (of {m.parent})" for n, m in snaps))
    edges = [f"{t} -> {n}" for n, m in league.members.items() for t in m.teachers]
    if edges:
        lines.append("teacher -> student: " + ", ".join(edges))
    if league.config.generalist in league.members:
        gate = league.regression_report()
        lines.append(
            "regression gate: "
            + (
                "; ".join(
                    f"{g['task']} {g['generalist']:.2f} < {g['snapshot']} "
                    f"{g['snapshot_success']:.2f}"
                    for g in gate
                )
                or "clear"
            )
        )
    return "\n".join(lines)
