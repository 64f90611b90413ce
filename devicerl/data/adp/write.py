"""Trajectories -> ADP standardized JSONL (schema `SCHEMA_VERSION`), one trajectory a line, each
screenshot a PNG file beside it (``images/<sha256 of its pixels>.png``: a screen shown twice is
written once).

A line's ``content``: the instruction as the user's ``text_observation``; per step, the screen
the agent saw and its action as an ``api_action`` (`devicerl.data.adp.vocab`) with the model's
text as ``reasoning_content`` and the step's reward; after the last action, the final screen.
A screen is an ``image_observation`` (screenshot path and UI elements as annotations) or, for
a web page (an observation that carries a ``url``), a ``web_observation`` with its url and
viewport and the image observation inside it (none when no screenshot was stored; the
elements then go whole into the details). ``details``: `devicerl.data.adp.details`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devicerl.data.adp.details import Details, StepExtra
from devicerl.data.adp.elements import annotation, element_record, fixes
from devicerl.data.adp.vocab import Screen, from_call, to_call
from devicerl.data.image_files import ImageFiles
from devicerl.data.staging import new_folder
from devicerl.errors import DataError
from devicerl.records import Observation, Step, Trajectory

#: The ADP standardized schema version written (neulab/agent-data-protocol schema/version.py).
SCHEMA_VERSION = "1.2.0"
#: The file a folder export writes its trajectories to.
JSONL_NAME = "trajectories.jsonl"


@dataclass
class ExportStats:
    trajectories: int = 0
    steps: int = 0
    images: int = 0


def is_web(obs: Observation) -> bool:
    """A web page: the device reported its url (`BrowserEnv` does)."""
    return "url" in obs.extras


def _screen(obs: Observation) -> Screen:
    return Screen(obs.screen_size, obs.elements, is_web(obs))


def _observation(obs: Observation, images: ImageFiles) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ADP observation of ``obs`` (empty: none to write, a screen of another device without
    a screenshot) and what the details must add to give it back exactly (`read_screen_extra`
    in the reader: ``size``, whole ``elements`` or element ``fixes``)."""
    extra: dict[str, Any] = {}
    image: dict[str, Any] | None = None
    derived = (0, 0)
    if obs.screenshot is not None:
        image = {
            "class_": "image_observation",
            "content": images.path(obs.screenshot),
            "annotations": [annotation(e) for e in obs.elements],
            "source": "environment",
        }
        derived = (obs.screenshot.shape[1], obs.screenshot.shape[0])
        fix = fixes(obs.elements)
        if fix is not None:
            extra["fixes"] = fix
    elif obs.elements:
        extra["elements"] = [element_record(e) for e in obs.elements]
    item: dict[str, Any] = image or {}
    if is_web(obs):
        derived = tuple(obs.screen_size)
        item = {
            "class_": "web_observation",
            "html": None,
            "axtree": None,
            "url": obs.extras.get("url"),
            "image_observation": image,
            "viewport_size": list(obs.screen_size),
        }
    if tuple(derived) != tuple(obs.screen_size):
        extra["size"] = list(obs.screen_size)
    return item, extra


def _action(step: Step, extra: StepExtra) -> dict[str, Any]:
    screen = _screen(step.observation)
    function, kwargs = to_call(step.action, screen)
    if from_call(function, kwargs, screen) != step.action:
        extra.action = step.action.to_dict()
    description = step.info.get("description")
    return {
        "class_": "api_action",
        "function": function,
        "kwargs": kwargs,
        "description": description if isinstance(description, str) else None,
        "reasoning_content": step.text,
        "reward": float(step.reward),
    }


def trajectory_record(t: Trajectory, images: ImageFiles) -> dict[str, Any]:
    """One trajectory as an ADP standardized trajectory (a JSON object)."""
    content: list[dict[str, Any]] = [
        {"class_": "text_observation", "content": t.instruction, "source": "user"}
    ]
    extras: list[StepExtra] = []
    for step in t.steps:
        item, screen = _observation(step.observation, images)
        if item:
            content.append(item)
        lp = step.log_prob
        extra = StepExtra(
            log_prob=lp if lp is not None and math.isfinite(lp) else None,
            policy_version=step.policy_version,
            terminated=step.terminated,
            truncated=step.truncated,
            verdict=step.verdict,
            screen=screen,
        )
        content.append(_action(step, extra))
        extras.append(extra)
    final = None
    if t.final_observation is not None:
        item, final = _observation(t.final_observation, images)
        if item:
            content.append(item)
    adp = t.extras.get("adp")
    record_id = adp.get("id") if isinstance(adp, dict) and isinstance(adp.get("id"), str) else None
    return {
        "schema_version": SCHEMA_VERSION,
        "id": record_id or t.episode_id,
        "content": content,
        "details": Details.of(t, extras, final).to_json(),
    }


def export_adp(trajectories: Iterable[Trajectory], out: str | Path) -> ExportStats:
    """Write ``trajectories`` to the new folder ``out`` (``trajectories.jsonl`` and
    ``images/``), built beside it and renamed into place at the end: a failure leaves nothing."""
    stats = ExportStats()
    with new_folder(out) as work:
        images = ImageFiles(work)
        with open(work / JSONL_NAME, "w", encoding="utf-8") as f:
            for t in trajectories:
                record = trajectory_record(t, images)
                f.write(json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n")
                stats.trajectories += 1
                stats.steps += t.length
        stats.images = images.written
        if not stats.trajectories:
            raise DataError("no episode to export: none matches the filters")
    return stats
