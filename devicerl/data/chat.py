"""Trajectories -> a chat fine-tuning dataset: one row per step whose assistant turn is the step's
action written by a `ChatCodec` (the text a vision-language policy would have written), after the
exact messages that policy reads, so a model fine-tuned on the rows acts through it unchanged.

The folder holds ``chat.jsonl`` (rows of ``messages`` in the transformers multimodal layout,
``{"type": "image"}`` marking the screenshot, and ``images``: the screenshot's path, relative to
the folder), ``images/`` (PNG, as the policy sees them: resized to ``image_size`` when the
policy resizes) and ``hf/``, the same rows as a Hugging Face ``datasets`` folder
(``datasets.load_from_disk``) with the images as an image feature; TRL's ``SFTTrainer`` and
LLaMA-Factory's multimodal loaders read this layout. Steps whose action is invalid (text the
policy could not parse) are not rows: they teach no action (`ChatStats.invalid` counts them).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from devicerl.actions import Action
from devicerl.data.image_files import ImageFiles
from devicerl.data.staging import new_folder
from devicerl.errors import ConfigError, DataError
from devicerl.records import Observation, Trajectory

JSONL_NAME = "chat.jsonl"
HF_DIR = "hf"


class ChatCodec(Protocol):
    """A policy's prompt and action language, as a chat export needs them."""

    name: str

    def messages(self, obs: Observation, has_image: bool) -> list[dict[str, Any]]:
        """The chat the policy reads for ``obs`` (system and user turns)."""
        ...

    def action_text(self, action: Action, obs: Observation) -> str:
        """``action`` on ``obs`` as the policy writes it."""
        ...


@dataclass
class ChatStats:
    trajectories: int = 0
    rows: int = 0
    invalid: int = 0
    images: int = 0


def chat_rows(
    t: Trajectory, codec: ChatCodec, images: ImageFiles, stats: ChatStats
) -> list[dict[str, Any]]:
    """The rows of one trajectory: a step's observation as the policy saw it (with the
    episode's earlier actions), the chat it read and the action it took as the answer."""
    rows = []
    for h, step in enumerate(t.steps):
        if step.action.is_invalid:
            stats.invalid += 1
            continue
        obs = t.agent_observation(h)
        shot = obs.screenshot
        chat = codec.messages(obs, shot is not None)
        answer = codec.action_text(step.action, obs)
        chat.append({"role": "assistant", "content": [{"type": "text", "text": answer}]})
        rows.append({
            "id": f"{t.episode_id}-{h}",
            "episode_id": t.episode_id,
            "step": h,
            "task": t.task,
            "codec": codec.name,
            "messages": chat,
            "images": [images.path(shot)] if shot is not None else [],
        })  # fmt: skip
    return rows


def export_chat(
    trajectories: Iterable[Trajectory],
    out: str | Path,
    codec: ChatCodec,
    *,
    image_size: tuple[int, int] | None = None,
    hf: bool = True,
) -> ChatStats:
    """Write the chat dataset of ``trajectories`` to the new folder ``out`` (built beside it
    and renamed into place at the end: a failure leaves nothing)."""
    stats = ChatStats()
    with new_folder(out) as work:
        images = ImageFiles(work, image_size)
        with open(work / JSONL_NAME, "w", encoding="utf-8") as f:
            for t in trajectories:
                for row in chat_rows(t, codec, images, stats):
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
                    stats.rows += 1
                stats.trajectories += 1
        stats.images = images.written
        if not stats.trajectories:
            raise DataError("no episode to export: none matches the filters")
        if hf:
            _save_hf(work)
    return stats


def _save_hf(folder: Path) -> None:
    """The rows as a ``datasets`` folder, the images' bytes inside it (no path outside)."""
    try:
        import datasets
    except ImportError:  # pragma: no cover - exercised only without the hf extra
        raise ConfigError("the chat export's hf/ folder needs: pip install devicerl[hf]") from None
    text = datasets.Value("string")
    features = datasets.Features({
        "id": text, "episode_id": text, "step": datasets.Value("int64"), "task": text,
        "codec": text, "messages": [{"role": text, "content": [{"type": text, "text": text}]}],
        "images": [datasets.Image()],
    })  # fmt: skip
    rows = []
    with open(folder / JSONL_NAME, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            row["images"] = [{"bytes": (folder / p).read_bytes(), "path": p} for p in row["images"]]
            rows.append(row)
    quiet = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()  # a command's output is its summary line
    try:
        datasets.Dataset.from_list(rows, features=features).save_to_disk(str(folder / HF_DIR))
    finally:
        if not quiet:
            datasets.enable_progress_bars()
