"""``devicerl export RUN_OR_STORE --format adp|chat --out DIR``: a run's (or a store's) episodes
as an Agent Data Protocol dataset (`devicerl.data.adp.write`) or as a chat fine-tuning dataset
in a policy's own prompt and action language (`devicerl.data.chat`), optionally only the
successful episodes, some tasks, or one judge verdict. DIR must be new; it appears whole at the
end or not at all.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from devicerl.cli.common import add_config_args, resolve_config
from devicerl.codecs import CODECS

#: The action languages a chat export can write: every codec's.
CHAT_CODECS = tuple(CODECS)


@dataclass
class ChatOptions:
    """How the policy that learns from a chat export reads and writes (as its `VLMConfig`)."""

    codec: str = field(
        default="json",
        metadata={
            "help": f"the policy's action language (agent.vlm.codec), one of "
            f"{', '.join(CHAT_CODECS)}"
        },
    )
    history: int = field(default=4, metadata={"help": "previous actions in the prompt", "min": 0})
    include_elements: bool = field(
        default=False, metadata={"help": "list the UI elements in the prompt"}
    )
    image_size: tuple[int, int] | None = field(
        default=None,
        metadata={"help": "(width, height) the policy resizes screenshots to (null: as is)"},
    )


@dataclass
class ExportConfig:
    """Options of `devicerl export`: which episodes, and the chat format's policy."""

    success: bool | None = field(
        default=None,
        metadata={"help": "true: successful episodes only; false: failed ones only"},
    )
    tasks: tuple[str, ...] = field(
        default=(), metadata={"help": "only these tasks, e.g. tasks=[miniwob/click-test]"}
    )
    verdict: Literal["success", "failure", "unknown"] | None = field(
        default=None, metadata={"help": "only episodes a judge labelled so"}
    )
    chat: ChatOptions = field(default_factory=ChatOptions)

    def validate(self) -> None:
        from devicerl.errors import ConfigError

        if self.chat.codec not in CHAT_CODECS:
            raise ConfigError(
                f"chat.codec: {self.chat.codec!r} is not one of {', '.join(CHAT_CODECS)}"
            )


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="write a run's episodes as an ADP dataset or a chat fine-tuning dataset",
        description="Write the episodes of RUN_OR_STORE to the new folder DIR: --format adp "
        "(Agent Data Protocol JSONL + images, docs/data.md) or --format chat (chat rows whose "
        "answers are the actions in the policy's own language, as JSONL + images and a Hugging "
        "Face datasets folder).",
    )
    p.add_argument("source", metavar="RUN_OR_STORE", help="a run folder or a trajectory store")
    p.add_argument("--format", required=True, choices=("adp", "chat"), help="the dataset format")
    p.add_argument("--out", required=True, metavar="DIR", help="new output folder")
    add_config_args(p, ExportConfig)
    p.set_defaults(func=run)


def selected(store: Any, cfg: ExportConfig) -> Iterator[Any]:
    """The store's episodes that pass the filters."""
    tasks = list(cfg.tasks) or None
    for t in store.iter_trajectories(task=tasks, success=cfg.success):
        if cfg.verdict is None or (
            t.judgement is not None and t.judgement.verdict.get("label") == cfg.verdict
        ):
            yield t


def chat_codec(options: ChatOptions) -> Any:
    """The codec ``options.codec`` names (`devicerl.data.chat.ChatCodec`)."""
    from devicerl.agents.vlm.chat import CodecChat
    from devicerl.codecs import make_codec

    return CodecChat(
        history=options.history,
        include_elements=options.include_elements,
        image_size=options.image_size,
        codec=make_codec(options.codec),
    )


def run(args: argparse.Namespace) -> int:
    from devicerl.data.store import TrajectoryStore
    from devicerl.errors import DataError, RunError
    from devicerl.files import check_apart, check_output
    from devicerl.runtime.runs.folder import find_store

    cfg = resolve_config(args)
    source, out = Path(args.source), Path(args.out)
    if not source.is_dir():
        raise DataError(f"{source} is not a run folder or a trajectory store")
    store = TrajectoryStore(find_store(source))
    if not store.shards():
        raise DataError(f"{source} holds no stored episodes")
    check_apart(args.out, [("RUN_OR_STORE", source)])
    check_output(out, what="--out", error=RunError)
    if out.exists():
        raise RunError(f"--out {out} exists: an export writes a new folder; choose another")
    if args.format == "adp":
        from devicerl.data.adp.write import JSONL_NAME, export_adp

        s = export_adp(selected(store, cfg), out)
        what = f"{s.trajectories} trajectories ({s.steps} steps, {s.images} images) as ADP"
        target = out / JSONL_NAME
    else:
        from devicerl.data.chat import JSONL_NAME as CHAT_JSONL
        from devicerl.data.chat import export_chat

        codec = chat_codec(cfg.chat)
        c = export_chat(selected(store, cfg), out, codec, image_size=cfg.chat.image_size)
        what = (
            f"{c.rows} chat rows from {c.trajectories} trajectories ({c.invalid} invalid steps "
            f"left out, {c.images} images) in {codec.name}"
        )
        target = out / CHAT_JSONL
    print(f"exported {what} -> {target}")
    return 0
