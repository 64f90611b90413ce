"""``devicerl cluster up --local N``: a Ray cluster of N worker nodes on this machine.

It prints the address to put in a training config (``cluster.address``) and keeps the nodes
running until interrupted (Ctrl-C) or ``--for`` seconds have passed. ``docs/scaling.md`` shows
the ``ray start`` commands for real hosts.
"""

from __future__ import annotations

import argparse

from devicerl.cli.common import bounded


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "cluster",
        help="start a local multi-node Ray cluster to try rollout groups on one machine",
        description="Start a Ray head and N worker nodes on this machine; each worker node "
        "offers CPUs and rollout-group slots (resource devicerl_group). Runs until Ctrl-C.",
    )
    p.add_argument("action", choices=["up"], help="up: start the nodes and wait")
    p.add_argument(
        "--local", type=bounded(min=1, max=64), required=True, metavar="N", help="worker nodes"
    )
    p.add_argument(
        "--cpus",
        type=bounded(float, gt=0, max=1024),
        default=1.0,
        help="CPUs each worker node offers (a share of a core is fine: 0.5)",
    )
    p.add_argument(
        "--groups-per-node",
        type=bounded(min=1, max=1024),
        default=1,
        help="rollout groups a node hosts",
    )
    p.add_argument(
        "--for",
        dest="seconds",
        type=bounded(float, gt=0),
        default=None,
        help="stop after this many seconds",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import signal
    import time

    from devicerl.runtime.cluster.local import GROUP_RESOURCE, LocalCluster

    # Ctrl-C / SIGINT stops the cluster even when started as a background job of a script,
    # which inherits SIGINT ignored (POSIX shells do that without job control); SIGTERM too.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    local = LocalCluster(args.local, args.cpus, args.groups_per_node)
    local.start()
    try:
        groups = args.local * args.groups_per_node
        print(f"address: {local.address}", flush=True)
        print(
            f"{args.local} worker nodes, {groups} rollout-group slots. Train on it with:\n"
            f"  RAY_AUTH_MODE=disabled devicerl train --config CONFIG "
            f"cluster.address={local.address} rollouts.groups={groups} "
            f"'rollouts.resources={{{GROUP_RESOURCE}: 1}}'\n"
            "Ctrl-C stops the cluster.",
            flush=True,
        )
        end = None if args.seconds is None else time.monotonic() + args.seconds
        while end is None or time.monotonic() < end:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        local.shutdown()
    print("cluster stopped", flush=True)
    return 0
