"""Shared pieces of the ADP tests: a policy that plays a script (with model text and log-probs,
so those fields travel), a field-by-field comparison of trajectories, and the round trip."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from devicerl.actions import Action
from devicerl.agents.base import ActionSample, Policy
from devicerl.data.adp import import_adp
from devicerl.data.adp.write import JSONL_NAME, export_adp
from devicerl.data.store import TrajectoryStore
from devicerl.records import Observation, Trajectory


class Script(Policy):
    """Plays ``actions`` in order (then declares the task complete), each with a text and a
    log-prob, as a model would record them."""

    def __init__(self, actions: Sequence[Action], version: int = 3) -> None:
        self.actions = list(actions)
        self.i = 0
        self.version = version

    def act(self, observations, greedy=False, epsilon=None, **kw):
        out = []
        for _ in observations:
            a = self.actions[self.i] if self.i < len(self.actions) else Action.complete()
            self.i += 1
            out.append(ActionSample(a, f"thinking {self.i}: {a.describe()}", -0.25 * self.i))
        return out

    def log_prob(self, observations, actions, texts=None):  # pragma: no cover - unused
        raise NotImplementedError


def same_observation(a: Observation | None, b: Observation | None) -> None:
    assert (a is None) == (b is None)
    if a is None or b is None:
        return
    assert b.instruction == a.instruction and b.step == a.step
    assert tuple(b.screen_size) == tuple(a.screen_size)
    assert (a.screenshot is None) == (b.screenshot is None)
    if a.screenshot is not None:
        assert np.array_equal(a.screenshot, b.screenshot)
    assert b.elements == a.elements  # every field, bit for bit
    assert b.extras.get("url") == a.extras.get("url")


#: The trajectory fields an ADP export keeps.
TRAJECTORY_FIELDS = (
    "task", "instruction", "seed", "end_reason", "success", "truncation_cause", "max_steps",
    "phase", "device", "judgement", "ground_truth", "episode_id",
)  # fmt: skip


def same(a: Trajectory, b: Trajectory) -> None:
    """``b`` (read back) holds every field of ``a`` an ADP export keeps (docs/data.md)."""
    for name in TRAJECTORY_FIELDS:
        assert getattr(b, name) == getattr(a, name), name
    assert len(b.steps) == len(a.steps)
    for sa, sb in zip(a.steps, b.steps):
        assert sb.action == sa.action  # bit for bit, invalid actions' raw text and reason too
        for name in ("reward", "terminated", "truncated", "text", "log_prob", "policy_version",
                     "verdict"):  # fmt: skip
            assert getattr(sb, name) == getattr(sa, name), name
        same_observation(sa.observation, sb.observation)
    same_observation(a.final_observation, b.final_observation)


def round_trip(trajs: Sequence[Trajectory], tmp: Path) -> tuple[list[Trajectory], list[dict]]:
    """Export to ADP, import into a new store, read back: the trajectories and the ADP lines."""
    export_adp(trajs, tmp / "adp")
    stats = import_adp([tmp / "adp"], tmp / "store")
    assert stats.trajectories == len(trajs) and sum(stats.read.unmapped.values()) == 0
    lines = [json.loads(s) for s in (tmp / "adp" / JSONL_NAME).read_text().splitlines()]
    back = {t.episode_id: t for t in TrajectoryStore(tmp / "store").read_all()}
    return [back[t.episode_id] for t in trajs], lines
