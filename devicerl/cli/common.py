"""CLI plumbing shared by commands that take a config dataclass.

A command module does::

    def add_parser(sub):
        p = sub.add_parser("train", help="...", description="...")
        p.add_argument("run_dir")                      # its own arguments, if any
        add_config_args(p, TrainConfig)                # --config, --set, KEY=VALUE, --help text
        p.set_defaults(func=run)

    def run(args):
        cfg = resolve_config(args)                     # ConfigError -> one line, exit 2
        run = start_run(args.run_dir, cfg)             # creates the folder, saves config.yaml

Overrides come from ``--config FILE`` (YAML, or a shipped setup's name), then ``--set
KEY=VALUE`` (repeatable) and positional ``KEY=VALUE`` words, later ones winning. ``--help``
lists every option of the config with its type, help text and default; ``--print-config``
prints the resolved config and exits.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import enum
import json
import shutil
import sys
import textwrap
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar, get_args, get_origin

import yaml

from devicerl.config import bounds_text, config_source, load_config, redact, to_dict

T = TypeVar("T")


def _type_label(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is typing.Literal:
        return "|".join(str(a) for a in get_args(tp))
    if origin in (typing.Union, types.UnionType):
        parts = [_type_label(a) for a in get_args(tp) if a is not type(None)]
        optional = type(None) in get_args(tp)
        return " | ".join(parts) + (" | null" if optional else "")
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "|".join(str(m.value) for m in tp)
    if origin is tuple and get_args(tp)[-1:] == (Ellipsis,):
        return f"list of {_type_label(get_args(tp)[0])}"
    if origin is not None:
        args = ", ".join(_type_label(a) for a in get_args(tp))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    return getattr(tp, "__name__", str(tp))


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return to_dict(f.default)
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return to_dict(f.default_factory())  # type: ignore[misc]
    return "(required)"


def config_options(cls: type, prefix: str = "") -> list[tuple[str, str, str, Any]]:
    """(dotted key, type, help, default) for every leaf option of a config dataclass; an
    optional section (``autoui: AutoUIOptions | None``) lists its options too, and a section
    whose dataclass another option picks (``env.options``, metadata ``variants``) those of
    every dataclass it can be."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        key = f"{prefix}{f.name}"
        if "variants" in f.metadata:
            out += _variant_options(f.metadata["variants"](), prefix=f"{key}.")
            continue
        tp = hints[f.name]
        section = _section(tp)
        if section is not None:
            out += config_options(section, prefix=f"{key}.")
            continue
        text = f.metadata.get("help", "")
        bounds = bounds_text(f.metadata)
        text = f"{text} ({bounds})" if bounds else text
        out.append((key, _type_label(tp), text, _default(f)))
    return out


def _variant_options(
    variants: dict[type, list[str]], prefix: str
) -> list[tuple[str, str, str, Any]]:
    """The options of each dataclass in ``variants`` (class -> the names that pick it, e.g.
    the devices that take it), each marked with those names and listed once: a class built on
    another listed one (`MiniWoBOptions` on `BrowserOptions`) adds only its own fields."""
    out = []
    for cls, _ in variants.items():
        takers = [n for c, names in variants.items() if issubclass(c, cls) for n in names]
        inherited = {
            f.name for base in cls.__mro__[1:] if base in variants for f in dataclasses.fields(base)
        }
        for key, tp, text, default in config_options(cls, prefix):
            if key[len(prefix) :].split(".")[0] not in inherited:
                out.append((key, tp, f"{text} [{', '.join(takers)}]".strip(), default))
    return out


def _section(tp: Any) -> type | None:
    """The dataclass of a (possibly optional) sub-section, else None."""
    if dataclasses.is_dataclass(tp):
        return tp  # type: ignore[return-value]
    if get_origin(tp) in (typing.Union, types.UnionType):
        inner = [a for a in get_args(tp) if a is not type(None)]
        if len(inner) == 1 and dataclasses.is_dataclass(inner[0]):
            return inner[0]  # type: ignore[return-value]
    return None


def config_help(cls: type) -> str:
    """The ``--help`` epilog: every config option with its type, help and default."""
    lines = [
        f"config options ({cls.__name__}); set them in --config FILE, with --set KEY=VALUE or "
        "as KEY=VALUE words:"
    ]
    for key, tp, text, default in config_options(cls):
        lines.append(f"  {key} ({tp}, default {json.dumps(default)})")
        if text:
            lines += textwrap.wrap(text, 88, initial_indent=" " * 6, subsequent_indent=" " * 6)
    return "\n".join(lines)


#: The ``--set`` example shown for each config class (a real key of it; a test checks).
EXAMPLES = {
    "TrainConfig": "actor.lr=3e-4",
    "JudgeConfig": "chat.model=gpt-4o",
    "ViewConfig": "max_episodes=50",
    "ImportConfig": "image_root=/data/digirl/images",
    "ExportConfig": "success=true",
}


def example_override(cls: type) -> str:
    """A ``KEY=VALUE`` example for ``cls``: a real key, with a value it accepts."""
    if cls.__name__ in EXAMPLES:
        return EXAMPLES[cls.__name__]
    key, _, _, default = config_options(cls)[0]
    return f"{key}={json.dumps(default)}"


def add_config_args(parser: argparse.ArgumentParser, cls: type) -> None:
    """Add --config/--set/KEY=VALUE/--print-config to ``parser`` and document ``cls``'s options
    in its ``--help``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    if parser.description:
        parser.description = textwrap.fill(parser.description, 88)
    parser.epilog = config_help(cls) + ("\n\n" + parser.epilog if parser.epilog else "")
    parser.add_argument(
        "--config",
        metavar="FILE|SETUP",
        default=None,
        help="YAML config file, or a shipped setup by name (e.g. miniwob-digirl-tuned; an "
        "unknown name lists them)",
    )
    parser.add_argument(
        "--set",
        dest="config_set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"override one config option (repeatable), e.g. --set {example_override(cls)}",
    )
    parser.add_argument(
        "config_overrides",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="more config overrides (same as --set)",
    )
    parser.add_argument(
        "--print-config", action="store_true", help="print the resolved config and exit"
    )
    parser.set_defaults(config_cls=cls)


def parse_args(
    parser: argparse.ArgumentParser, argv: typing.Sequence[str] | None = None
) -> argparse.Namespace:
    """``parser.parse_args`` that also accepts KEY=VALUE words after options for commands
    with a config (argparse stops filling positionals once an option intervenes)."""
    args, extra = parser.parse_known_args(argv)
    if extra and hasattr(args, "config_cls") and all(_is_override(w) for w in extra):
        args.config_overrides = [*args.config_overrides, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _is_override(word: str) -> bool:
    return "=" in word and not word.startswith("-")


def resolve_config(args: argparse.Namespace, cls: type | None = None) -> Any:
    """The config from ``args`` (file, then --set, then KEY=VALUE words).

    Raises `ConfigError` (one line, naming the key) on unknown keys or bad values; with
    ``--print-config`` prints the resolved config (secrets redacted) and exits.
    """
    cls = cls or args.config_cls
    overrides = [*args.config_set, *args.config_overrides]
    cfg = load_config(cls, config_source(args.config) if args.config else None, overrides)
    if getattr(args, "print_config", False):
        print_config(cfg)
        raise SystemExit(0)
    return cfg


def print_config(cfg: Any) -> None:
    """Write ``cfg`` as YAML to stdout, secrets redacted."""
    sys.stdout.write(yaml.safe_dump(redact(cfg), sort_keys=False))


def start_run(
    path: str | Path | Any, config: Any, *, overwrite: bool = False, resumable: bool = True
) -> Any:
    """Create a new run folder (refusing an existing run unless ``overwrite``), hold its lock
    and save the resolved config (secrets redacted) in it. ``path`` may be a `RunDir`."""
    from devicerl.runtime.runs.folder import RunDir

    run = path if isinstance(path, RunDir) else RunDir(path)
    run.check_new(overwrite, resumable=resumable)
    run.start_new(overwrite=overwrite)
    run.save_config(config)
    return run


def start_new_run(
    args: argparse.Namespace,
    config: Any,
    prefix: str,
    build: Callable[[Any], T],
    *,
    resumable: bool = True,
    inputs: Sequence[tuple[str, str | Path]] = (),
) -> tuple[Any, T]:
    """The run folder of a new run and what ``build(run_dir)`` makes (e.g. the trainer, which
    builds the agent and writes nothing), in the order that keeps a rejected run from writing:
    the folder is checked (apart from the run's ``inputs``, `devicerl.files.check_apart`),
    ``build`` runs, then the folder is created, locked and the config saved. Without ``--out``
    the folder is a new timestamped one under ``runs/``."""
    from devicerl.files import check_apart
    from devicerl.runtime.runs.folder import RunDir, reserve_run_path

    if args.out is not None:
        check_apart(args.out, [*inputs, *config_file(args)])
    run = RunDir(args.out) if args.out is not None else RunDir(reserve_run_path(prefix))
    try:
        run.check_new(args.overwrite, resumable=resumable)
        run.made_folder = args.out is None or not run.path.exists()  # for `discard_if_refused`
        built = build(run)
        start_run(run, config, overwrite=args.overwrite, resumable=resumable)
    except BaseException:
        if args.out is None:
            with contextlib.suppress(OSError):
                run.path.rmdir()  # the reserved folder, while still empty
        raise
    return run, built


def config_file(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """``--config FILE`` as an input of the command (a shipped setup's name is none)."""
    path = Path(args.config) if getattr(args, "config", None) else None
    return [("--config", path)] if path is not None and path.exists() else []


@contextlib.contextmanager
def discard_if_refused(run: Any) -> Iterator[None]:
    """Around a new run's work: when its input is refused after the folder was made (data
    found unusable once read) and the run stored nothing and checkpointed nothing, the folder
    it made goes, so the same command can be retried with the same ``--out``."""
    from devicerl.errors import ConfigError, DataError, PathError, TaskError

    try:
        yield
    except (ConfigError, DataError, PathError, TaskError):
        if run.untouched():
            run.unlock()
            if run.made_folder:
                shutil.rmtree(run.path, ignore_errors=True)
            else:  # the folder was there (empty) before the run: keep it, empty again
                for entry in run.path.iterdir():
                    if entry.is_dir() and not entry.is_symlink():
                        shutil.rmtree(entry, ignore_errors=True)
                    else:
                        entry.unlink(missing_ok=True)
        raise


def bounded(kind: type = int, **meta: Any) -> Callable[[str], Any]:
    """An argparse ``type`` for a number flag (``kind`` int or float) with the config loader's
    bounds vocabulary (``min``, ``gt``, ``max``, ...; 64-bit integers, finite floats always):
    ``--devices 0`` is one line, as ``env.num_envs=0`` is."""
    import math

    from devicerl.config import check_bounds
    from devicerl.errors import ConfigError

    what = "an integer" if kind is int else "a number"

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text[:40]!r}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text[:40]!r}")
        try:
            check_bounds("value", value, meta)
        except ConfigError as e:
            raise argparse.ArgumentTypeError(str(e).split(": ", 1)[1]) from None
        return value

    parse.__name__ = "integer" if kind is int else "number"  # argparse names the type in errors
    return parse


def add_run_args(parser: argparse.ArgumentParser, default: str) -> None:
    """``--out`` (default: a new timestamped folder) and ``--overwrite`` for commands that
    start a run."""
    parser.add_argument(
        "--out", default=None, metavar="RUN_DIR", help=f"run folder (default: {default})"
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="delete an existing run in --out first (without it, an existing run is refused)",
    )
