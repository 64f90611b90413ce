"""``devicerl tasks``: list task suites, splits and tasks."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tasks",
        help="list task suites, splits and tasks",
        description="Without SPEC: list the task suites (with what a suite's tasks need to run "
        "beyond devicerl, e.g. BrowserGym's environment and a benchmark's servers) and splits. "
        "With SPEC (a suite, a "
        "split, a glob such as miniwob/click-*, an instruction-list file, a suite file of your "
        "own web tasks, or a comma-separated mix): list the tasks it resolves to.",
    )
    p.add_argument(
        "spec",
        nargs="?",
        default=None,
        help="a suite, split, glob (miniwob/click-*), instruction-list path or suite file "
        "(docs/custom-tasks.md); without it, list suites and splits",
    )
    p.add_argument("--count", action="store_true", help="print only the number of tasks")
    p.add_argument(
        "--reach",
        action="store_true",
        help="per task: the action kinds a solution needs and whether the agent has them "
        "(MiniWoB++ tasks only, e.g. `devicerl tasks --reach miniwob`)",
    )
    p.add_argument(
        "--agent",
        default="small",
        help="with --reach: 'small' (the default small agent) or a saved small agent's folder",
    )
    p.add_argument(
        "--agent-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="with --reach and --agent small: a small-agent option (repeatable), e.g. "
        "--agent-set point_actions=true --agent-set features.pixels=true",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from devicerl import tasks
    from devicerl.errors import ConfigError

    given = [
        f for f, on in (("--agent", args.agent != "small"), ("--agent-set", args.agent_set)) if on
    ]
    if given and not args.reach:
        raise ConfigError(f"{given[0]} applies with --reach only (devicerl tasks --reach SPEC)")
    if args.count and args.reach:
        raise ConfigError("--count and --reach: choose one (--reach prints a table per task)")
    if args.spec is None and (args.reach or args.count):
        raise ConfigError(f"{'--reach' if args.reach else '--count'} needs a task SPEC")
    if args.spec is None:
        print("suites:")
        for name in tasks.suites():
            needs = tasks.suite_needs(name)
            print(f"  {name}" + (" - needs:" if needs else ""))
            for line in needs:
                print(f"      {line}")
        if tasks.splits():
            print("splits:")
            for name, patterns in sorted(tasks.splits().items()):
                print(f"  {name}: {', '.join(patterns)}")
        return 0
    found = tasks.resolve(args.spec)
    if args.reach:
        return _reach(found, args.agent, args.agent_set)
    if args.count:
        print(len(found))
        return 0
    for t in found:
        extra = f"  {t.instruction!r}" if t.instruction else ""
        print(f"{t.name}  max_steps={t.max_steps}{extra}")
    return 0


def _reach(found: list, agent: str, options: list[str]) -> int:
    import sys
    from pathlib import Path

    from devicerl.agents.small import SmallAgent
    from devicerl.agents.small_net import SmallAgentConfig
    from devicerl.config import load_config
    from devicerl.errors import ConfigError
    from devicerl.tasks.miniwob_reach import format_reach, reach_rows

    def fail(message: str) -> int:
        print(f"devicerl tasks: error: {message}", file=sys.stderr)
        return 2

    names = [t.name for t in found if t.name.startswith("miniwob/")]
    if not names:
        return fail("--reach covers MiniWoB++ tasks only (e.g. miniwob)")
    if agent != "small" and not (Path(agent) / "small_agent.json").is_file():
        return fail(f"--agent {agent!r} is neither 'small' nor a saved small agent folder "
                    "(no small_agent.json)")  # fmt: skip
    if agent != "small" and options:
        return fail("--agent-set applies to --agent small only")
    try:
        config = load_config(SmallAgentConfig, None, options)
    except (ConfigError, ValueError, TypeError) as e:
        return fail(f"--agent-set: {e}")
    policy = SmallAgent(config) if agent == "small" else SmallAgent.from_pretrained(agent)
    label = " ".join([agent, *options])
    print(f"agent: {label}; has {' '.join(sorted(k.value for k in policy.action_kinds))}")
    print(format_reach(reach_rows(names, policy.action_kinds)))
    return 0
