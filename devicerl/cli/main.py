"""The ``devicerl`` command line: one module per sub-command under `devicerl.cli`.

Each command module defines ``add_parser(subparsers)`` and ``run(args) -> int``; heavy imports
happen inside ``run`` so ``devicerl --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import traceback
import typing
from collections.abc import Sequence

from devicerl import __version__
from devicerl.cli.common import parse_args
from devicerl.errors import DeviceRLError
from devicerl.secrets import install_log_filter, scrub, scrubbed_streams

#: Sub-command modules, in the order ``--help`` lists them.
COMMANDS = (
    "demo",
    "train",
    "eval",
    "collect",
    "tasks",
    "env",
    "view",
    "judge-eval",
    "bench",
    "import-digirl",
    "import-adp",
    "export",
    "cluster",
    "fleet",
    "league",
    "interpolate",
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
    """Run one command. Whatever it prints leaves through the secret scrubber."""
    with scrubbed_streams():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
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
    except KeyboardInterrupt:
        print(f"devicerl {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        return report_error(args.command, e)


def report_error(command: str, e: BaseException) -> int:
    """The one rule for errors that reach the top: what bad input or the system caused (a
    `DeviceRLError`, an `OSError` naming its file, memory) is one line and exit code 2; anything
    else is a bug in devicerl: its traceback, and a line that says so (exit code 1)."""
    if isinstance(e, DeviceRLError):
        message = str(e)
    elif isinstance(e, OSError):
        where = " ".join(str(f) for f in (e.filename, e.filename2) if f is not None)
        message = f"{e.strerror or type(e).__name__}" + (f": {where}" if where else "")
    elif isinstance(e, MemoryError) or _allocation_failed(e):
        message = f"out of memory: the input asks for more than this machine has ({_first(e)})"
    else:
        trace = "".join(traceback.format_exception(e))
        print(scrub(trace.rstrip()), file=sys.stderr)
        print(
            f"devicerl {command}: internal error: this is a bug in devicerl, not in your input "
            f"(please report it with the traceback above): "
            f"{scrub(' '.join(f'{type(e).__name__}: {e}'.split()))}",
            file=sys.stderr,
        )
        return 1
    message = " ".join(message.split())  # one line, whatever the message held
    print(f"devicerl {command}: error: {scrub(message)}", file=sys.stderr)
    return 2


def _allocation_failed(e: BaseException) -> bool:
    """An allocator's refusal that libraries raise as a RuntimeError (torch: "can't allocate
    memory", "out of memory"): the machine's limit, not a bug."""
    text = str(e).lower()
    return isinstance(e, RuntimeError) and (
        "can't allocate memory" in text or "out of memory" in text
    )


def _first(e: BaseException) -> str:
    text = " ".join(str(e).split())
    text = text.split("DefaultCPUAllocator: ", 1)[-1]
    return text if len(text) <= 120 else text[:117] + "..."


if __name__ == "__main__":
    raise SystemExit(main())
