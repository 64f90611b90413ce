"""Success-adaptive exploration: each episode's exploration level from its task's recent success.

A policy trained only on what worked (Filtered BC, DigiRL's advantage-filtered regression) never
learns from a task it has not solved yet: on such a task it repeats whatever it does elsewhere
(e.g. taps the button the instruction names, ending the episode), and a global exploration floor
small enough not to hurt the solved tasks rarely finds the first success. `ExplorationSchedule`
gives every new episode an exploration level (`EpisodePlan.epsilon`: the share of uniform choice
the agent mixes into each part of its action; the small agent uses it, others ignore it):

- rule ``linear`` (a policy learning from scratch): ``max_level x (1 - recent success rate of
  its task)``: a task with no success yet is explored at ``max_level``, a solved one hardly at
  all, and the level falls as the task is learnt;
- rule ``unsolved`` (a pre-trained policy, which already solves many tasks by sampling its own
  actions, and whose forms uniform choices would break): ``max_level`` only for tasks whose
  recent success rate (over at least one episode) is at most ``threshold``, 0 for every other
  task, unseen ones included. With ``probe`` (k > 0) every k-th episode of an explored task acts
  without exploration, and only such episodes decide whether the task is solved: a task the
  policy solves leaves exploration after a few probes (without them, explored episodes of a
  five-step form rarely succeed, and the task would stay "unsolved" for good).

The planner asks `level` when it plans an episode; the collector `record`s every labelled
episode as it hands it out (after judging, so a VLM judge's verdict counts). Beyond the DigiRL
paper; off by default.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, Literal

#: How a task's level follows its recent success (see the module doc).
RULES = ("linear", "unsolved")


class ExplorationSchedule:
    """Per-task exploration levels from each task's last ``window`` labelled episodes."""

    def __init__(
        self,
        max_level: float,
        window: int = 20,
        rule: Literal["linear", "unsolved"] = "linear",
        threshold: float = 0.0,
        probe: int | None = None,
    ) -> None:
        if not 0.0 < max_level < 1.0:
            raise ValueError(f"exploration max_level must be in (0, 1), got {max_level}")
        if window < 1:
            raise ValueError(f"exploration window must be >= 1, got {window}")
        if rule not in RULES:
            raise ValueError(f"exploration rule must be one of {', '.join(RULES)}, got {rule!r}")
        if not 0.0 <= threshold < 1.0:
            raise ValueError(f"exploration threshold must be in [0, 1), got {threshold}")
        if probe is not None and (probe < 1 or rule != "unsolved"):
            raise ValueError(f"exploration probe must be >= 1 and needs rule unsolved, got {probe}")
        self.max_level = max_level
        self.window = window
        self.rule = rule
        self.threshold = threshold
        self.probe = probe
        self._explored: dict[str, int] = {}  # episodes planned in the explored state, per task
        self._recent: dict[str, deque[bool]] = {}
        self._lock = threading.Lock()  # the collector thread plans, the trainer checkpoints

    @classmethod
    def from_config(cls, ex: Any) -> ExplorationSchedule | None:
        """From an `ExplorationConfig`; None when it is off (``max`` null)."""
        if ex is None or ex.max is None:
            return None
        return cls(ex.max, ex.window, ex.rule, ex.threshold, ex.probe)

    def success_rate(self, task: str) -> float | None:
        """The task's success rate over its recent episodes (None: none seen yet)."""
        with self._lock:
            recent = self._recent.get(task)
            return sum(recent) / len(recent) if recent else None

    def level(self, task: str) -> float:
        """The exploration level of a new episode of ``task`` (unknown tasks: ``max_level``
        under rule ``linear``, 0 under ``unsolved``)."""
        rate = self.success_rate(task)
        if self.rule == "linear":
            return self.max_level * (1.0 - (rate or 0.0))
        if rate is None or rate > self.threshold:
            return 0.0
        if self.probe:
            with self._lock:
                n = self._explored[task] = self._explored.get(task, 0) + 1
            if n % self.probe == 0:  # a probe: the policy's own success decides when it stops
                return 0.0
        return self.max_level

    def record(self, task: str, success: bool, level: float = 0.0) -> None:
        """Count one labelled (complete, judged) episode of ``task`` acted at exploration
        ``level`` (with ``probe``, an explored episode is not counted)."""
        if self.probe and level > 0:
            return
        with self._lock:
            self._recent.setdefault(task, deque(maxlen=self.window)).append(bool(success))

    def state_dict(self) -> dict[str, Any]:
        with self._lock:
            return {task: [int(s) for s in d] for task, d in self._recent.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with self._lock:
            self._recent = {
                task: deque((bool(s) for s in seq), maxlen=self.window)
                for task, seq in state.items()
            }
