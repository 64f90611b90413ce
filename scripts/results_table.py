"""Writes the README's headline results table from the files in ``benchmarks/results/``.

The table sits between ``<!-- results:start -->`` and ``<!-- results:end -->`` in README.md; no
figure in it is typed by hand. Each learning row reads the newest ``learning-YYYY-MM-DD.json``
(``learning-dev16-YYYY-MM-DD.json`` for dev16) that measured its setup, the ablation row the
newest ``ablation-dev16-YYYY-MM-DD.json``, the full-suite row the newest
``miniwob-suite-YYYY-MM-DD.json`` (files with another suffix, e.g. ``-v1``,
``-focus-leak`` or ``-4k``, are earlier or smaller runs kept for the record), and the
pre-trained full-suite row the newest ``miniwob-suite-YYYY-MM-DD[-suffix].json`` whose run
trained from a saved agent (``agent.init_from`` or ``agent.path`` in its command); the
unseen-tasks row reads the newest ``unseen-tasks-YYYY-MM-DD.json``, the interpolation row the newest
``unseen-interpolation-YYYY-MM-DD.json``, the AgentLab-protocol row the ``RESULT`` lines of the
newest ``agentlab-miniwob-split-YYYY-MM-DD.txt`` and ``agentlab-miniwob-seeds-YYYY-MM-DD.txt``.

    python scripts/results_table.py           # rewrite the table in README.md
    python scripts/results_table.py --check   # exit 1 when README.md is out of date
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "README.md"
START, END = "<!-- results:start -->", "<!-- results:end -->"
_LEARNING = re.compile(r"^learning-\d{4}-\d{2}-\d{2}\.json$")
_LEARNING_DEV16 = re.compile(r"^learning-dev16-\d{4}-\d{2}-\d{2}\.json$")
_LEAGUE = re.compile(r"^league-\d{4}-\d{2}-\d{2}(-partial)?\.json$")
_SUITE = re.compile(r"^miniwob-suite-\d{4}-\d{2}-\d{2}\.json$")
_SUITE_ANY = re.compile(r"^miniwob-suite-\d{4}-\d{2}-\d{2}(-[\w-]+)?\.json$")
_UNSEEN = re.compile(r"^unseen-tasks-\d{4}-\d{2}-\d{2}\.json$")
_INTERPOLATION = re.compile(r"^unseen-interpolation-\d{4}-\d{2}-\d{2}\.json$")
_ABLATION = re.compile(r"^ablation-dev16-\d{4}-\d{2}-\d{2}\.json$")
_AGENTLAB = re.compile(r"^agentlab-miniwob-(split|seeds)-\d{4}-\d{2}-\d{2}\.txt$")
_RESULT = re.compile(
    r"^RESULT protocol=(\w+) system=(\w+) mean=([\d.]+) episodes=(\d+) env_steps=(\d+)"
)
_PUBLISHED = re.compile(r"^published \(AgentLab, all 125 tasks, 625 episodes\): \S+ ([\d.]+)")
_ABLATED = (  # (label, system) in the order of the row
    ("DigiRL", "digirl"),
    ("no step filter", "digirl_no_step_filter"),
    ("no curriculum", "digirl_no_curriculum"),
    ("no critics", "digirl_no_critics"),
    ("Filtered BC", "filtered_bc"),
)


def _newest(results: Path, pattern: re.Pattern[str]) -> str | None:
    """The newest result file whose name matches ``pattern`` (names sort by their date)."""
    return max((p.name for p in results.glob("*.json") if pattern.match(p.name)), default=None)


def _setup_rows(results: Path, pattern: re.Pattern[str]) -> list[str]:
    """A row per setup of the learning benchmarks whose file names match ``pattern``, each
    from the newest file that measured that setup (a run of one setup, e.g. after a change to
    `tuned` alone, replaces that setup's row and leaves the other's)."""
    newest: dict[str, tuple[str, dict]] = {}
    for name in sorted(p.name for p in results.glob("*.json") if pattern.match(p.name)):
        for setup, report in json.loads((results / name).read_text()).get("setups", {}).items():
            newest[setup] = (name, report)
    return [_setup_row(name, setup, r) for setup, (name, r) in sorted(newest.items())]


def _learning_rows(results: Path) -> list[str]:
    rows = _setup_rows(results, _LEARNING)
    if not rows:
        raise SystemExit(f"no learning-YYYY-MM-DD.json with setups in {results}")
    return rows


def _with_ci(mean: float, ci: list[float]) -> str:
    """``0.765 [0.69, 0.84]``: a mean and its 95 % interval."""
    return f"{mean:.3f} [{ci[0]:.2f}, {ci[1]:.2f}]"


def _setup_row(name: str, setup: str, report: dict) -> str:
    """One setup of a learning benchmark on test instances: greedy and sampled (T=1) success,
    each the mean over training seeds with its 95 % t-interval."""
    s = report["summary"]

    def cell(label: str, key: str) -> str:
        v = s[key]
        return (
            f"{label} {_with_ci(v['mean'], v['ci95'])} / "
            f"{_with_ci(v['mean_sampled'], v['ci95_sampled'])}"
        )

    systems = [
        ("DigiRL", "digirl"),
        ("Filtered BC", "filtered_bc"),
        ("start (untrained)", "start"),
        ("random", "random"),
    ]
    cells = ", ".join(cell(label, key) for label, key in systems if key in s)
    start = (
        "from the web-skills pre-trained agent ([docs/pretraining.md](docs/pretraining.md))"
        if setup == "pretrained"
        else "from scratch"
    )
    setting = (
        f"small CPU agent online {start} on MiniWoB++ {report['suite']}, "
        f"{report['budget']:,} env steps, {len(report['seeds'])} seeds, `{setup}` setup, "
        f"{report['split']} instances; greedy / sampled success, mean [95 % t-interval]"
    )
    suite = "" if report["suite"] == "dev" else f"{report['suite']} "
    return f"| Learning {suite}({setup}) | {setting} | {cells} | `{name}` |"


def _ablation_row(results: Path) -> str | None:
    """The newest dev16 ablation (docs/learning.md#ablations): greedy success of DigiRL and of
    DigiRL without each of its critic-driven parts, beside Filtered BC."""
    name = _newest(results, _ABLATION)
    if name is None:
        return None
    (setup, report), *_ = json.loads((results / name).read_text())["setups"].items()
    s = report["summary"]
    cells = ", ".join(
        f"{label} {_with_ci(s[key]['mean'], s[key]['ci95'])}" for label, key in _ABLATED if key in s
    )
    setting = (
        f"as Learning dev16: {report['budget']:,} env steps, {len(report['seeds'])} seeds, "
        f"`{setup}` setup, {report['split']} instances; greedy success, mean [95 % t-interval]"
    )
    link = "([docs/learning.md](docs/learning.md#ablations))"
    return f"| DigiRL ablations dev16 | {setting} | {cells} {link} | `{name}` |"


def _league_row(results: Path) -> str | None:
    """The newest league benchmark (docs/league.md#benchmark), if one was committed."""
    name = _newest(results, _LEAGUE)
    if name is None:
        return None
    data = json.loads((results / name).read_text())
    s = data["summary"]

    def cell(label: str, key: str) -> str:
        if key not in s:
            return f"{label} not run"
        v = s[key]
        seeds = f"{int(v['seeds'])} seed{'s' if v['seeds'] > 1 else ''}"
        return f"{label} {v['mean']:.3f} ({v['min']:.3f}-{v['max']:.3f}, {seeds})"

    cells = ", ".join(
        cell(label, key)
        for label, key in (("league generalist", "league"), ("single", "single"), ("PBT", "pbt"))
    )
    if data.get("left_out"):
        cells += f"; partial: {', '.join(data['left_out'])} not finished"
    setting = (
        f"small CPU agent online from scratch on MiniWoB++ dev16, {data['budget']:,} env steps "
        f"per system, test instances; greedy success of the league's generalist alone, mean "
        "(min-max); fixed hyperparameters = single"
    )
    link = "([docs/league.md](docs/league.md#benchmark))"
    return f"| League | {setting} | {cells} {link} | `{name}` |"


def _from_saved_agent(command: list[str]) -> bool:
    """Whether a full-suite run trained from a saved agent (not ``--untrained``)."""
    saved = any(a.startswith(("agent.init_from=", "agent.path=")) for a in command)
    return saved and "--untrained" not in command


#: The learners of the full-suite runs, as the table names them (``--algorithm``).
_LEARNERS = {"digirl": "DigiRL", "filtered_bc": "Filtered BC"}


def _learner(command: list[str]) -> str:
    """The ``--algorithm`` a full-suite run trained with (DigiRL where the command names none)."""
    for i, arg in enumerate(command):
        if arg.startswith("--algorithm="):
            return arg.split("=", 1)[1]
        if arg == "--algorithm" and i + 1 < len(command):
            return command[i + 1]
    return "digirl"


def _newest_scratch_suite(results: Path) -> list[str]:
    """The newest budget-sized full-suite run from scratch (no suffix), as a list of one."""
    name = _newest(results, _SUITE)
    return [name] if name else []


def _newest_pretrained_suite(results: Path) -> list[str]:
    """Per learner, the newest full-suite run that trained from a saved agent, whatever its
    suffix (DigiRL first)."""
    newest: dict[str, str] = {}
    for name in sorted(p.name for p in results.glob("*.json") if _SUITE_ANY.match(p.name)):
        command = json.loads((results / name).read_text())["command"]
        if _from_saved_agent(command):
            newest[_learner(command)] = name
    return [newest[k] for k in _LEARNERS if k in newest]


def _suite_row(results: Path, names: list[str], pretrained: bool) -> str | None:
    """A full-suite benchmark (docs/reach.md#full-suite-benchmark): from scratch or from the
    web-skills pre-trained agent grown with the reach heads; one run per learner."""
    if not names:
        return None
    runs = [json.loads((results / n).read_text()) for n in names]
    learners = [_LEARNERS[_learner(d["command"])] for d in runs]
    cols = runs[0]["summary"]["columns"]
    start = (
        "from the web-skills pre-trained agent grown with the reach heads, `pretrained` "
        "fine-tuning,"
        if pretrained
        else "(`tuned` + reach heads) online from scratch"
    )
    steps = " / ".join(f"{d['env_steps']:,}" for d in runs)
    setting = (
        f"small CPU agent, one {' and one '.join(learners)} run {start} over "
        f"Synapse's {runs[0]['summary']['tasks']} tasks, {steps} env steps, 1 seed, "
        f"{runs[0]['eval_episodes']} test instances per task; greedy success, mean over all "
        "tasks (out of reach = 0)"
    )
    ours = "; ".join(
        f"{who} {d['summary']['suite_mean']:.3f} ({d['summary']['tasks_at_human']} tasks at "
        "human level)"
        for who, d in zip(learners, runs)
    )
    cells = (
        f"{ours}; published: "
        f"CC-Net (BC only) {cols['CC-Net(BC)']['mean_all']:.3f}, best pre-2022 "
        f"{cols['Others']['mean_reported']:.3f} (its {cols['Others']['reported']} tasks), "
        f"human {cols['Human']['mean_all']:.3f} "
        "([docs/reach.md](docs/reach.md#full-suite-benchmark))"
    )
    label = "MiniWoB++ full suite (pretrained)" if pretrained else "MiniWoB++ full suite"
    source = ", ".join(f"`{n}`" for n in names)
    return f"| {label} | {setting} | {cells} | {source} |"


def _unseen_row(results: Path) -> str | None:
    """Transfer to tasks never trained on (docs/benchmarks.md#unseen-tasks): RL on the
    ``miniwob-train`` tasks, greedy success on test instances of the ``miniwob-unseen`` ones."""
    name = _newest(results, _UNSEEN)
    if name is None:
        return None
    data = json.loads((results / name).read_text())
    rows = list(data["rows"].values())
    learners = [r for r in rows if r["system"] not in ("random", "start")]
    names = {"digirl": "DigiRL", "filtered_bc": "Filtered BC", "grpo": "GRPO", "gigpo": "GiGPO"}
    by_system: dict[str, list[dict]] = {}
    for r in learners:
        by_system.setdefault(r["system"], []).append(r)
    seeds = max((len(v) for v in by_system.values()), default=0)
    steps = min((r["env_steps"] for r in learners), default=0)  # the budget; runs end past it
    start = "the reach pre-trained agent" if data["setup"] == "pretrained" else "scratch"
    setting = (
        f"small CPU agent online from {start} on the `miniwob-train` tasks in reach, "
        f"{steps:,} env steps, {seeds} seed{'s' if seeds > 1 else ''}; greedy success on test "
        "instances of the 34 `miniwob-unseen` tasks, never trained on (out of reach = 0); in "
        "brackets: on the train tasks"
    )

    def cell(label: str, group: list[dict]) -> str:
        unseen = sum(r["unseen"] for r in group) / len(group)
        train = sum(r["train"] for r in group) / len(group)
        return f"{label} {unseen:.3f} ({train:.3f})"

    cells = [cell(names.get(s, s), g) for s, g in by_system.items()]
    for system, label in (("start", "start (untrained)"), ("random", "random")):
        if mine := [r for r in rows if r["system"] == system]:
            cells.append(cell(label, mine))
    link = "([docs/benchmarks.md](docs/benchmarks.md#unseen-tasks))"
    return f"| Unseen MiniWoB++ tasks | {setting} | {', '.join(cells)} {link} | `{name}` |"


def _interpolation_row(results: Path) -> str | None:
    """The unseen-tasks protocol's agents mixed with their start's weights
    (docs/benchmarks.md#unseen-tasks): test instances, per alpha."""
    name = _newest(results, _INTERPOLATION)
    if name is None:
        return None
    data = json.loads((results / name).read_text())
    by_alpha: dict[float, list[dict]] = {}
    for r in data["rows"]:
        by_alpha.setdefault(r["alpha"], []).append(r)
    seeds = max(len(g) for g in by_alpha.values())
    cells = [
        f"{'the agents themselves' if a == 1 else f'alpha {a:g}'} "
        f"{sum(r['unseen'] for r in g) / len(g):.3f} ({sum(r['train'] for r in g) / len(g):.3f})"
        for a, g in sorted(by_alpha.items())
    ]
    start = re.search(r"start_unseen=(\S+) start_train=(\S+)", data["result"][-1])
    if start:
        cells.append(f"start {start[1]} ({start[2]})")
    setting = (
        f"the unseen-tasks protocol's DigiRL agents ({seeds} seeds) with weights (1 - alpha) "
        "start + alpha trained, alpha chosen on validation; greedy success on test instances of "
        "the unseen tasks; in brackets: on the train tasks"
    )
    link = "([docs/benchmarks.md](docs/benchmarks.md#unseen-tasks))"
    return f"| Unseen tasks, interpolated | {setting} | {', '.join(cells)} {link} | `{name}` |"


def _agentlab_row(results: Path) -> str | None:
    """MiniWoB++ under AgentLab's protocol (docs/benchmarks.md#agentlab_miniwobpy): the
    ``RESULT`` lines of the newest ``agentlab-miniwob-{split,seeds}-YYYY-MM-DD.txt``, beside the
    published GenericAgent range those files carry."""
    names: dict[str, str] = {}
    for path in results.glob("*.txt"):
        if m := _AGENTLAB.match(path.name):
            names[m[1]] = max(names.get(m[1], ""), path.name)
    names = {p: names[p] for p in ("split", "seeds") if p in names}
    labels = {"digirl": "DigiRL", "start": "start (untrained)", "random": "random"}
    cells, published, steps = [], [], []
    for protocol, name in names.items():
        lines = (results / name).read_text().splitlines()
        found = [m for m in map(_RESULT.match, lines) if m]
        if not found:
            continue
        order = sorted(found, key=lambda m: list(labels).index(m[2]) if m[2] in labels else -1)
        got = ", ".join(f"{labels.get(m[2], m[2])} {float(m[3]):.3f}" for m in order)
        cells.append(f"{protocol}: {got} ({found[0][4]} episodes)")
        published += [float(m[1]) for m in map(_PUBLISHED.match, lines) if m]
        steps += [int(m[5]) for m in found if m[2] not in ("random", "start")]
    if not cells:
        return None
    if published:
        cells.append(
            f"AgentLab's published GenericAgent rows on the seeds' 625: "
            f"{min(published):.3f}-{max(published):.3f}"
        )
    setting = (
        "small CPU agent, one DigiRL run per protocol (`tuned` + reach heads) online from scratch "
        f"through BrowserGym's MiniWoB++, {min(steps, default=0):,} env steps, 1 seed, greedy; "
        "split: trained on AgentLab's 62 train tasks, evaluated on its 63 test tasks; seeds: "
        "trained on all 125 at other seeds, evaluated on AgentLab's 125 x 5 (out of reach = 0)"
    )
    link = "([docs/benchmarks.md](docs/benchmarks.md#agentlab_miniwobpy))"
    files = ", ".join(f"`{n}`" for n in names.values())
    return f"| MiniWoB++, AgentLab's protocol | {setting} | {'; '.join(cells)} {link} | {files} |"


def table(results: Path = RESULTS) -> str:
    """The Markdown table, from the result files alone."""
    pool = json.loads((results / "pool_throughput.json").read_text())["summary"]
    faults = json.loads((results / "pool_faults.json").read_text())
    rows = [
        "| benchmark | setting | result | source |",
        "|---|---|---|---|",
        *_learning_rows(results),
        *_setup_rows(results, _LEARNING_DEV16),
        *(
            r
            for r in (
                _ablation_row(results),
                _suite_row(results, _newest_scratch_suite(results), pretrained=False),
                _suite_row(results, _newest_pretrained_suite(results), pretrained=True),
                _unseen_row(results),
                _interpolation_row(results),
                _agentlab_row(results),
                _league_row(results),
            )
            if r
        ),
        "| Pool throughput | 64 synthetic devices, heavy-tail latencies; env-steps/s | "
        f"{pool['vs_lockstep_heavy64']:.2f}x DigiRL-style lockstep, "
        f"{pool['vs_gymnasium_heavy64']:.2f}x gymnasium AsyncVectorEnv, "
        f"{pool['efficiency_heavy64']:.2f} of the ideal | `pool_throughput.json` |",
        f"| Pool under faults | {faults['n']} devices, {faults['kill_rate_per_min']:.0%} of "
        f"workers killed per minute, {faults['hang_rate']:.0%} of steps hung | "
        f"{faults['ratio']:.2f} of the fault-free env-steps/s | `pool_faults.json` |",
    ]
    return "\n".join(rows)


def render(readme: str, results: Path = RESULTS) -> str:
    """``readme`` with the table between the markers replaced."""
    if START not in readme or END not in readme:
        raise SystemExit(f"README.md needs the markers {START} and {END}")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table(results)}\n{END}{tail}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only check that README.md is current")
    args = p.parse_args()
    text = README.read_text()
    new = render(text)
    if args.check:
        if new != text:
            print("README.md results table is out of date: run scripts/results_table.py")
            return 1
        return 0
    README.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
