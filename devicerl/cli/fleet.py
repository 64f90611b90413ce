"""``devicerl fleet up --config CONFIG``: warm devices that outlive runs; ``fleet down`` stops them.

``up`` builds the config's ``env.num_envs`` devices (its ``env`` section), opens each of the
evaluation tasks (``tasks.eval`` or ``tasks.train``, the first ``eval.n_tasks``) once on every
device, then serves them until interrupted (Ctrl-C, SIGTERM, ``fleet down``) or ``--for``
seconds have passed. A run with ``env.worker=fleet`` and the same ``env`` section attaches to
them (docs/fleet.md).
"""

from __future__ import annotations

import argparse

from devicerl.cli.common import add_config_args, bounded


def add_parser(sub: argparse._SubParsersAction) -> None:
    from devicerl.runtime.setup.config import TrainConfig

    p = sub.add_parser(
        "fleet",
        help="keep warm devices up between runs (runs attach with env.worker=fleet)",
        description="up: build the config's devices, open its evaluation tasks once on each, "
        "and serve them until Ctrl-C (runs attach with env.worker=fleet and the same env "
        "section, env.fleet=NAME for a --name). down: stop the fleet.",
    )
    p.add_argument("action", choices=["up", "down"], help="up: start and serve; down: stop")
    p.add_argument(
        "--name",
        default=None,
        help="the fleet's name (default: env.fleet, 'default'); runs attach with env.fleet=NAME",
    )
    p.add_argument(
        "--for",
        dest="seconds",
        type=bounded(float, gt=0),
        default=None,
        help="up: stop after this many seconds",
    )
    add_config_args(p, TrainConfig)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import signal

    from devicerl.cli.common import resolve_config
    from devicerl.envs.registry import EnvSpec
    from devicerl.pool.workers.base import DeviceRecipe
    from devicerl.pool.workers.fleet import Fleet, stop_fleet
    from devicerl.tasks import resolve

    cfg = resolve_config(args)
    name = args.name or cfg.env.fleet
    if args.action == "down":
        pid = stop_fleet(name)
        print(f"fleet {name!r} stopped (process {pid})", flush=True)
        return 0
    if cfg.env.worker == "fleet":
        cfg.env.worker = "subprocess"  # the same config serves the fleet and its runs
    warm = list(resolve(cfg.tasks.eval or cfg.tasks.train))[: cfg.eval.n_tasks]
    recipe = DeviceRecipe.from_spec(EnvSpec(cfg.env.name, cfg.env.options))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    fleet = Fleet(name, recipe, cfg.env.num_envs, warm)
    try:
        took = fleet.start()
        print(
            f"fleet {name!r}: {cfg.env.num_envs} {recipe.label} devices up, {len(warm)} tasks "
            f"opened on each, in {took:.1f}s.\nAttach a run with env.worker=fleet "
            f"env.fleet={name} (same env section); Ctrl-C or `devicerl fleet down --name "
            f"{name}` stops it.",
            flush=True,
        )
        fleet.watch(float("inf") if args.seconds is None else args.seconds)
    except KeyboardInterrupt:
        pass
    finally:
        fleet.stop()
    print(f"fleet {name!r} stopped", flush=True)
    return 0
