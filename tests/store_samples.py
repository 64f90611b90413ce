"""Hand-built trajectories that exercise every stored field, and a canonical JSON form of what a
store gives back. `tests/data/stores/write.py` wrote the committed stores with them at older
commits (the builder uses only the record fields those commits had); `test_store_versions.py`
reads those stores with today's code and compares with the JSON written beside them."""

from __future__ import annotations

import dataclasses
import enum
from pathlib import Path
from typing import Any

import numpy as np

from devicerl import records
from devicerl.actions import Action
from devicerl.records import EndReason, Observation, Step, Trajectory, UIElement

#: The committed sample stores, one folder per store version.
STORES = Path(__file__).resolve().parent / "data" / "stores"


def _pixels(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(6, 8, 3), dtype=np.uint8)


def _observation(step: int, pixels: np.ndarray | None, text: str = "OK") -> Observation:
    button = UIElement(
        id="b1",
        role="button",
        text=text,
        bbox=(1.0, 2.0, 5.5, 4.0),
        clickable=True,
        attrs={"tag": "button", "classes": ["a", "b"]},
    )
    field = UIElement(id="f1", role="textbox", value="typed", focused=True, editable=True)
    return Observation(
        instruction="Tap OK then type hi",
        screen_size=(8, 6),
        screenshot=pixels,
        elements=[button, field],
        step=step,
        extras={"url": "http://127.0.0.1/page", "n": 3},
    )


def _known(cls: type, **values: Any) -> Any:
    """``cls(**values)`` with only the fields ``cls`` has (older commits had fewer)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def sample_trajectories() -> list[Trajectory]:
    """Three episodes: a judged success with repeated screens and every optional step field, a
    failure without pixels whose final observation was not captured, a truncated reset."""
    shot, other = _pixels(1), _pixels(2)
    actions = [Action.tap(0.25, 0.5), Action.swipe(0.5, 0.8, 0.5, 0.2), Action.type_text("hi")]
    steps = [
        Step(
            observation=_observation(i, shot if i != 1 else other),
            action=a,
            reward=1.0 if i == 2 else 0.0,
            terminated=i == 2,
            info={"latency_s": 0.5 * i, "nested": {"k": [1, 2]}},
            text=f"Action Decision: {a.type.value}" if i else None,
            log_prob=None if i == 0 else -0.25 * i,
            policy_version=i,
            agent_time_s=0.01 * i,
            device_time_s=0.02 * i,
            started_at=1000.0 + i,
            verdict={"judge": "vlm", "success": True, "step": i} if i == 2 else None,
        )
        for i, a in enumerate(actions)
    ]
    plan = getattr(records, "EpisodePlan", None)
    judgement = getattr(records, "Judgement", None)
    first = _known(
        Trajectory,
        task="synthetic/tap",
        instruction="Tap OK then type hi",
        seed=7,
        steps=steps,
        final_observation=_observation(3, shot),
        success=True,
        episode_id="e" * 32,
        env_id=1,
        device="synthetic",
        reset_time_s=0.125,
        started_at=999.5,
        max_steps=5,
        plan=plan(policy="agent", epsilon=0.25, greedy=False, group="g1", group_size=2)
        if plan
        else None,
        phase="eval",
        judgement=judgement(
            verdict={"label": "success", "reason": "done"},
            native_success=False,
            native_end_reason="max_steps",
            cut_steps=1,
        )
        if judgement
        else None,
        ground_truth=True,
        extras={"features": np.arange(6, dtype=np.float32).reshape(2, 3), "note": "x"},
    ).end(EndReason.SUCCESS)
    first.ended_at = 1003.5
    blind = Step(observation=_observation(0, None, text="no pixels"), action=Action.back())
    second = _known(
        Trajectory,
        task="synthetic/type",
        instruction="Type hi",
        seed=8,
        steps=[blind, Step(observation=_observation(1, None), action=Action.complete())],
        episode_id="f" * 32,
        env_id=0,
        device="synthetic",
        started_at=2000.0,
        max_steps=None,
    ).end(EndReason.AGENT_ENDED)
    second.ended_at = 2001.0
    third = _known(
        Trajectory,
        task="synthetic/tap",
        instruction="",
        seed=3,
        episode_id="a" * 32,
        started_at=3000.0,
    ).end(EndReason.TRUNCATED, cause="reset: DeviceCrashed: gone")
    third.ended_at = 3000.5
    return [first, second, third]


def canonical(value: Any) -> Any:
    """``value`` as plain JSON values: dataclasses as field mappings, arrays with their dtype and
    shape, enums as their values, tuples as lists."""
    if isinstance(value, np.ndarray):
        return {"ndarray": str(value.dtype), "shape": list(value.shape), "data": value.tolist()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value
