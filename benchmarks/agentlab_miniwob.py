"""MiniWoB++ under AgentLab's protocol, through BrowserGym: the small agent beside AgentLab's
published agents.

AgentLab's protocol (`devicerl.tasks.browsergym`: ServiceNow/BrowserGym at commit 9e779f08):
its 125 tasks run through BrowserGym's own MiniWoB++ (``browsergym/miniwob.<task>``, our
``browsergym`` device in BrowserGym's environment, pages from the ``miniwob`` package, offline,
their sha256 recorded), 5 seeds per task from its generator (all below 34), 10 steps, binary
reward, the ``browsergym_split`` column. Two ways to train the small CPU agent on it, both
trained and evaluated through BrowserGym's device:

- ``split``: train on the 62 train tasks, evaluate on the 63 test tasks (315 episodes);
- ``seeds``: train on all 125 tasks, evaluate on all 125 at AgentLab's seeds (625 episodes);
  training draws its seeds from our training range, and the run checks from its stored
  episodes that none was an evaluation seed of its task.

Systems per protocol: ``random`` (uniform over what the agent can express), ``start`` (the
agent untrained: fresh, or ``agent.path``) and the learner (``--algorithm``, default DigiRL,
the ``tuned`` setup with the reach heads of ``miniwob_suite.HEADS``; ``pretrained`` with
``agent.path``). A task the agent cannot reach (`devicerl.tasks.miniwob_reach`; on BrowserGym
also every task needing a ``<select>``: no action of ours is ``select_option``) is neither
trained on nor evaluated, and counts 0 over its 5 episodes. Every evaluation of the test
instances is counted in the sealed ledger (suites ``agentlab-miniwob-split`` and
``agentlab-miniwob-seeds``; not ``--quick``'s, which is a smoke test of two tasks). Beside
ours: AgentLab's published GenericAgent results on the same protocol (`PUBLISHED`; all 125
tasks, no training: they compare with ``seeds``; no published number covers the test split
alone).

    python benchmarks/agentlab_miniwob.py --out runs/agentlab --budget 20000
    python benchmarks/agentlab_miniwob.py --quick --out /tmp/agentlab   # 2 tasks, minutes
    python benchmarks/agentlab_miniwob.py --protocols seeds --systems learner --budget 5000

Each system's evaluation of a protocol is long here (``seeds``: 625 BrowserGym episodes, about
an hour on 2 cores with 6 devices; BrowserGym starts a new Chromium at every reset), so
``--systems`` runs a protocol in parts.

The last lines are ``RESULT protocol=P system=S mean=X episodes=N env_steps=N test_evals=N``,
one per protocol and system; ``--out`` gets ``agentlab.json`` and ``agentlab.txt``.
Interrupted, the same command continues (finished training runs and evaluations are reused,
an unfinished run resumes from its last checkpoint).
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.comparison import RUN_OPTIONS, START, run_config, train_phases
from harness.sealed import record_test_evaluation, test_evaluations
from miniwob_suite import HEADS

from devicerl.files import file_sha256, write_json
from devicerl.records import TaskInstance
from devicerl.tasks import resolve
from devicerl.tasks.browsergym import agentlab_seeds, html_digest, html_hashes

#: AgentLab's published results on this protocol (all 125 tasks x 5 seeds = 625 episodes, no
#: training): the latest row per agent of ``reproducibility_journal.csv`` in ServiceNow/AgentLab
#: at commit 69cd8930e1dca6893899aef3002c5b2342e0f5d2, benchmark ``miniwob``: agent,
#: avg_reward, std_err, BrowserGym version, date of the study.
PUBLISHED: tuple[tuple[str, float, float, str, str], ...] = (
    ("GenericAgent-claude-3.5-sonnet", 0.698, 0.018, "0.10.2", "2024-10-25"),
    ("GenericAgent-o1-mini", 0.678, 0.019, "0.10.2", "2024-10-25"),
    ("GenericAgent-llama-3.1-405b", 0.646, 0.019, "0.13.3", "2024-11-29"),
    ("GenericAgent-gpt-4o", 0.638, 0.019, "0.10.2", "2024-10-25"),
    ("GenericAgent-llama-3.1-70b", 0.576, 0.020, "0.10.2", "2024-10-25"),
    ("GenericAgent-gpt-4o-mini", 0.566, 0.020, "0.10.2", "2024-10-25"),
)
#: protocol -> (training split, evaluation split).
PROTOCOLS = {
    "split": ("agentlab-miniwob-train", "agentlab-miniwob-test"),
    "seeds": ("agentlab-miniwob", "agentlab-miniwob"),
}
LEARNERS = {"digirl": "DigiRL", "filtered_bc": "Filtered BC"}
RANDOM = "random"
#: The systems of a protocol, in the order they run (``learner`` is ``--algorithm``).
SYSTEMS = (RANDOM, START, "learner")
#: --quick: one train and one test task of AgentLab's split.
QUICK = ("browsergym/miniwob.click-test-2", "browsergym/miniwob.click-test")
#: The device: BrowserGym's (its environment from the cache), AgentLab's step budget.
DEVICE = ("env.name=browsergym", "env.options={}", "tasks.max_steps=10", "eval.at_end=false")


def _parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="runs/agentlab-miniwob")
    ap.add_argument("--budget", type=int, default=20000, help="training env steps per learner")
    ap.add_argument("--protocols", nargs="+", default=list(PROTOCOLS), choices=list(PROTOCOLS))
    ap.add_argument("--algorithm", default="digirl", choices=list(LEARNERS))
    ap.add_argument(
        "--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS),
        help="systems to run (learner: --algorithm); a protocol can be run in parts",
    )  # fmt: skip
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--devices", type=int, default=3, help="BrowserGym devices in parallel")
    ap.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}; tiny budget")
    ap.add_argument("--fresh", action="store_true", help="start over instead of reusing runs")
    ap.add_argument("--allow-commit-change", action="store_true")
    ap.add_argument("overrides", nargs="*", help="extra KEY=VALUE config overrides")
    args = ap.parse_args()
    if args.quick:
        args.budget = min(args.budget, 16)
    return args


def _heads(args: argparse.Namespace) -> list[str]:
    """The reach heads (none for a saved agent: it brings its own); no browser-device option."""
    if any(o.startswith("agent.path=") for o in args.overrides):
        return []
    return [h for h in HEADS if not h.startswith("env.options.")]


def _config(args: argparse.Namespace, system: str, train: list[str]) -> Any:
    setup = "pretrained" if any(o.startswith("agent.path=") for o in args.overrides) else "tuned"
    extra = [*_heads(args), *DEVICE, f"env.num_envs={args.devices}", *args.overrides]
    if args.quick:
        extra += ["trajectories_per_iter=4", "env.num_envs=1"]
    return run_config(
        system, args.seed, setup=setup, suite=",".join(train), family="miniwob",
        budget=args.budget, eval_episodes=1, split="validation", extra=extra,
    )  # fmt: skip


def reachable(names: list[str], cfg: Any) -> tuple[list[str], dict[str, str]]:
    """(tasks the agent reaches on BrowserGym's MiniWoB++, the others with the reason)."""
    from miniwob_suite import _agent_kinds

    from devicerl.agents.capabilities import ActionKind
    from devicerl.tasks.miniwob_reach import reach_rows

    kinds = _agent_kinds(cfg)
    rows = reach_rows([n.split(".", 1)[1] for n in names], kinds)
    why: dict[str, str] = {}
    for name, row in zip(names, rows):
        if row.outside:
            why[name] = f"outside the AitW action space: {row.outside}"
        elif ActionKind.SELECT in row.needs:
            why[name] = "needs a <select>: BrowserGym's select_option has no action of ours"
        elif row.missing:
            why[name] = "the agent lacks " + ", ".join(k.value for k in row.missing)
    return [n for n in names if n not in why], why


class FixedInstances:
    """AgentLab's (task, seed) instances, in order, once (a sampler for `EnvPool`)."""

    def __init__(self, instances: list[TaskInstance]) -> None:
        self._left = list(instances)

    def next(self) -> TaskInstance | None:
        return self._left.pop(0) if self._left else None


def _instances(names: list[str], max_steps: int) -> list[TaskInstance]:
    seeds = agentlab_seeds()
    tasks = {t.name: t.with_max_steps(max_steps) for t in resolve(names)}
    return [TaskInstance(tasks[n], s) for n in names for s in seeds[n]]


def eval_key(agent_kind: str, agent: Path | None, names: list[str]) -> dict[str, Any]:
    """What an evaluation's result depends on (the tasks, the saved agent's files, its kind,
    the code), as JSON reads it back from ``eval.json``."""
    from devicerl.runtime.runs.provenance import code_identity, provenance

    files = sorted(agent.iterdir()) if agent is not None else []
    key = {
        "tasks": names,
        "agent": {p.name: file_sha256(p) for p in files if p.is_file()},
        "agent_kind": agent_kind,
        "code": code_identity(provenance()),
    }
    return json.loads(json.dumps(key))


def evaluate(cfg: Any, agent: Path | None, names: list[str], sub: Path, reuse: bool):
    """Greedy episodes of the agent (saved in `agent`, or the one `cfg` builds) on AgentLab's
    instances of `names`; ``eval.json`` in `sub`, reused when the agent, tasks and code match.
    Returns (the evaluation, whether it ran afresh)."""
    from devicerl.runtime.loop.evaluation import evaluate_policy
    from devicerl.runtime.loop.trainer import Trainer
    from devicerl.runtime.runs.folder import RunDir

    key = eval_key(cfg.agent.kind, agent, names)
    done = sub / "eval.json"
    if reuse and done.exists():
        saved = json.loads(done.read_text("utf-8"))
        if saved.get("key") == key:
            return saved, False
    ecfg = replace(cfg, mode="eval", algo="none")
    if agent is not None:
        ecfg = replace(ecfg, agent=replace(cfg.agent, path=str(agent)))
    run_dir = RunDir(sub).start_new(overwrite=True)
    run_dir.save_config(ecfg)
    trainer = Trainer(ecfg, run_dir)
    sampler = FixedInstances(_instances(names, 10))
    result = evaluate_policy(trainer.make_pool, trainer.actor, sampler, greedy=True)
    out = {**result.as_dict(), "key": key}
    write_json(done, out, indent=1)
    return out, True


def held_out(folder: Path, names: list[str]) -> int:
    """Training episodes of the run in `folder` that played an evaluation instance."""
    from devicerl.data.store import TrajectoryStore

    store = folder / "trajectories"
    if not store.is_dir():
        return 0
    seeds = agentlab_seeds()
    index = TrajectoryStore(store).index().to_pydict()
    return sum(
        1 for t, s in zip(index["task"], index["seed"]) if t in names and s in seeds.get(t, ())
    )


def score(evaluation: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """Mean success over the protocol's 5 episodes per task (unreached tasks count 0), with its
    standard error, as AgentLab reports its own."""
    per_task = evaluation["per_task"]
    n = 5 * len(names)
    successes = sum(per_task.get(t, {}).get("successes", 0) for t in names)
    mean = successes / n
    return {
        "mean": mean,
        "std_err": math.sqrt(mean * (1 - mean) / n),
        "episodes": n,
        "truncated": evaluation.get("truncated", 0),
        "per_task": {t: per_task.get(t, {"successes": 0, "episodes": 0}) for t in names},
    }


def run_protocol(args: argparse.Namespace, protocol: str, setup_rows: list) -> list[str]:
    """Train and evaluate every system of one protocol; its RESULT lines."""
    train_split, eval_split = PROTOCOLS[protocol]
    train = [t.name for t in resolve(train_split)]
    evaluated = [t.name for t in resolve(eval_split)]
    if args.quick:
        train = [t for t in QUICK if t in train]
        evaluated = [t for t in QUICK if t in evaluated]
    probe = _config(args, START, train)
    train_ok, _ = reachable(train, probe)
    eval_ok, why_eval = reachable(evaluated, probe)
    print(
        f"== {protocol}: {len(train_ok)} of {len(train)} training and {len(eval_ok)} of "
        f"{len(evaluated)} evaluated tasks in reach; out of reach (count 0): "
        f"{', '.join(sorted(why_eval)) or 'none'}",
        flush=True,
    )
    lines, fresh = [], False
    for system in [args.algorithm if s == "learner" else s for s in args.systems]:
        cfg = _config(args, system, train_ok)
        folder = Path(args.out) / protocol / f"{system}-s{args.seed}"
        agent: Path | None = None
        env_steps = 0
        if system in LEARNERS:
            summary = train_phases(
                folder, cfg, [args.budget], lambda *_: None,
                reuse=not args.fresh, allow=args.allow_commit_change,
            )  # fmt: skip
            agent, env_steps = folder / "agent", int(summary["env_steps"])
        elif system == START and cfg.agent.path:
            agent = Path(cfg.agent.path)
        evaluation, ran = evaluate(cfg, agent, eval_ok, folder / "agentlab-eval", not args.fresh)
        fresh = fresh or ran
        row = {"protocol": protocol, "system": system, "env_steps": env_steps,
               **score(evaluation, evaluated)}  # fmt: skip
        if system in LEARNERS and protocol == "seeds":
            row["training_episodes_on_eval_seeds"] = held_out(folder, evaluated)
        row["out_of_reach"] = why_eval
        setup_rows.append(row)
        print(f"== {protocol} {system}: {row['mean']:.3f} over {row['episodes']} episodes")
    setup = "pretrained" if probe.agent.path else "tuned"
    sealed = f"agentlab-miniwob-{protocol}"
    command = "python " + shlex.join(sys.argv)
    from devicerl.runtime.runs.provenance import provenance

    if args.quick:  # a smoke test of two tasks, not the protocol: nothing is counted
        evals: int | str = "none(--quick)"
    elif fresh:
        evals = record_test_evaluation(sealed, setup, command, provenance())
    else:
        evals = test_evaluations(sealed, setup)
    for row in setup_rows:
        if row["protocol"] == protocol:
            row["test_evals"] = evals
            lines.append(
                f"RESULT protocol={protocol} system={row['system']} mean={row['mean']:.3f} "
                f"episodes={row['episodes']} env_steps={row['env_steps']} test_evals={evals}"
            )
    return lines


def main() -> int:
    from devicerl.envs.browsergym.env import browsergym_python
    from devicerl.runtime.runs.provenance import provenance

    args = _parse()
    browsergym_python(None)  # refuses in one line when BrowserGym's environment is missing
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    lines = [line for p in args.protocols for line in run_protocol(args, p, rows)]
    published = [
        f"published (AgentLab, all 125 tasks, 625 episodes): {name} {mean:.3f} +- {err:.3f}"
        for name, mean, err, _, _ in PUBLISHED
    ]
    hashes = html_hashes()
    text = "\n".join([*published, *lines])
    print(text)
    (out / "agentlab.txt").write_text(text + "\n", encoding="utf-8")
    report = {
        "command": ["python", "benchmarks/agentlab_miniwob.py", *sys.argv[1:]],
        "run_options": list(RUN_OPTIONS),
        "heads": _heads(args),
        "budget": args.budget,
        "rows": rows,
        "published": [
            dict(zip(("agent", "mean", "std_err", "browsergym", "date"), p)) for p in PUBLISHED
        ],
        "miniwob_html_sha256": html_digest(hashes),
        "miniwob_html_files": hashes,
        "provenance": provenance(),
        "result": lines,
    }
    write_json(out / "agentlab.json", report, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
