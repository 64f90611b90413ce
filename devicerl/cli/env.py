"""``devicerl env NAME``: build a foreign device's own Python environment, once, and print its
interpreter."""

from __future__ import annotations

import argparse

#: The environments devicerl knows how to make, and the requirements each is built from.
ENVIRONMENTS = {"browsergym": "devicerl.envs.browsergym.env:REQUIREMENTS"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "env",
        help="build a foreign device's own Python environment (once) and print its interpreter",
        description="Devices whose packages conflict with devicerl's run under another "
        "interpreter (docs/bring-your-benchmark.md). This builds that environment with venv and "
        "pip on first use, caches it under $DEVICERL_ENV_CACHE (default "
        "~/.cache/devicerl/envs), and prints its interpreter; later calls print it at once. "
        "Example: devicerl env browsergym",
    )
    p.add_argument("name", choices=sorted(ENVIRONMENTS), help="which environment")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import importlib
    import sys

    from devicerl.envs.foreign.venv import build_record, ensure_env

    module, _, attr = ENVIRONMENTS[args.name].partition(":")
    requirements = getattr(importlib.import_module(module), attr)
    python = ensure_env(requirements)
    record = build_record(python)
    print(
        f"{args.name}: {' '.join(record['requirements'])} (built in {record['build_s']} s)",
        file=sys.stderr,
    )
    print(python)
    return 0
