"""The ``devicerl`` command line: one module per sub-command under `devicerl.cli`.

Each command module defines ``add_parser(subparsers)`` and ``run(args) -> int``; heavy imports
happen inside ``run`` so ``devicerl --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import typing
from collections.abc import Sequence

from devicerl import __version__
from devicerl.cli.common import parse_args
from devicerl.errors import DeviceRLError
from devicerl.secrets import install_log_filter, scrub

#: Sub-command modules, in the order ``--help`` lists them.
COMMANDS = (
    "demo",
    "train",
    "eval",
    "collect",
    "tasks",
    "view",
    "judge-eval",
    "bench",
    "import-digirl",
    "cluster",
    "league",
)


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (exit code 2), like every other
    error of the command line; ``--help`` still shows the usage."""

    def error(self, message: str) -> typing.NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see: {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="devicerl",
        description="Train and evaluate device-control agents on a fleet of devices.",
    )
    parser.add_argument("--version", action="version", version=f"devicerl {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"devicerl.cli.{name.replace('-', '_')}")
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parse_args(parser, argv)
    logging.basicConfig(
        level=logging.DEBUG
        if args.verbose > 1
        else logging.INFO
        if args.verbose
        else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    install_log_filter()  # every log line passes the secret scrubber
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except DeviceRLError as e:
        message = " ".join(str(e).split())  # one line, whatever the message held
        print(f"devicerl {args.command}: error: {scrub(message)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"devicerl {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
