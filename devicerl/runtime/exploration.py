"""Success-adaptive exploration: each episode's exploration level from its task's recent success.

A policy trained only on what worked (Filtered BC, DigiRL's advantage-filtered regression) never
learns from a task it has not solved yet: on such a task it repeats whatever it does elsewhere (e.g.
taps the button the instruction names, ending the episode) and a global exploration floor small
enough not to hurt the solved tasks rarely finds the first success. `TaskExploration` gives every
new episode an exploration level of ``max_level x (1 - recent success rate of its task)``: a task
with no success yet is explored at ``max_level``, a solved one hardly at all, and the level falls as
the task is learnt. The collector asks `level` when an episode starts and passes the level to the
policy as ``observation.extras["explore"]`` (the small agent mixes that fraction of uniform choice
into its action-type and element choices, and with ``explore_spans`` into its typed span; other
agents ignore it); the collector `record`s every labelled episode as it hands it out (after judging,
so a VLM judge's verdict counts). Beyond the DigiRL paper; off by default.

That rule (``linear``) suits a policy learning from scratch. A pre-trained policy
(docs/pretraining.md) already solves many tasks by sampling its own actions, and uniform choices
mixed into every step of a five-step form break what it knows: rule ``unsolved`` explores, at
``max_level``, only the tasks whose recent success rate (over at least one episode) is at most
``threshold`` (0: no success at all), and leaves every other task, unseen ones included, to the
policy.

Under ``unsolved`` a task explored at ``max_level`` rarely succeeds (uniform choices mixed into
every step of a five-step form), so judged by all its episodes it stays "unsolved" for good even
where the policy itself solves it: the exploration trap. With ``probe`` (k > 0) every k-th
episode of an explored task acts without exploration, and only episodes acted without
exploration decide whether the task is solved, so a task the policy solves leaves exploration
after a few probes. With ``probe_greedy`` a probe also acts greedily (the arg-max of every part of
the action; the collector marks its trajectory ``extras["greedy"]``): a pre-trained agent with a
wide action space may solve a form greedily every time and by sampling almost never, and then a
sampled probe never finds the success that would end exploration and give the learner the form
to imitate (docs/training.md#exploration).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

#: Key of the per-observation exploration level in ``Observation.extras``.
EXPLORE_KEY = "explore"
#: Key marking, in ``Trajectory.extras``, an episode acted greedily as a probe.
GREEDY_KEY = "greedy"
#: How a task's level follows its recent success (see the module doc).
RULES = ("linear", "unsolved")


class TaskExploration:
    """Per-task exploration levels from each task's last ``window`` labelled episodes."""

    def __init__(
        self,
        max_level: float,
        window: int = 20,
        rule: str = "linear",
        threshold: float = 0.0,
        probe: int = 0,
        probe_greedy: bool = False,
    ) -> None:
        if not 0.0 <= max_level < 1.0:
            raise ValueError(f"exploration max_level must be in [0, 1), got {max_level}")
        if window < 1:
            raise ValueError(f"exploration window must be >= 1, got {window}")
        if rule not in RULES:
            raise ValueError(f"exploration rule must be one of {', '.join(RULES)}, got {rule!r}")
        if not 0.0 <= threshold < 1.0:
            raise ValueError(f"exploration threshold must be in [0, 1), got {threshold}")
        if probe < 0 or (probe and rule != "unsolved"):
            raise ValueError(f"exploration probe must be >= 0 and needs rule unsolved, got {probe}")
        if probe_greedy and not probe:
            raise ValueError("exploration probe_greedy needs probe > 0")
        self.max_level = max_level
        self.probe = probe
        self.probe_greedy = probe_greedy
        self._explored: dict[str, int] = {}  # episodes started in the explored state, per task
        self.window = window
        self.rule = rule
        self.threshold = threshold
        self._recent: dict[str, deque[bool]] = {}
        self._lock = threading.Lock()  # the collector thread reads, the trainer writes

    @classmethod
    def from_config(cls, ex: Any) -> TaskExploration | None:
        """From an `ExplorationConfig` (``max``, ``window``, ``rule``, ``threshold``,
        ``probe``, ``probe_greedy``); None when ``max`` is 0 (off)."""
        if ex.max <= 0:
            return None
        return cls(ex.max, ex.window, ex.rule, ex.threshold, ex.probe, ex.probe_greedy)

    def success_rate(self, task: str) -> float | None:
        """The task's success rate over its recent episodes (None: none seen yet)."""
        with self._lock:
            recent = self._recent.get(task)
            return sum(recent) / len(recent) if recent else None

    def level(self, task: str | None) -> float:
        """The exploration level of a new episode of ``task`` (unknown tasks: ``max_level``
        under rule ``linear``, 0 under ``unsolved``)."""
        return self.plan(task)[0]

    def plan(self, task: str | None) -> tuple[float, bool]:
        """A new episode of ``task``: its exploration level, and whether it acts greedily (a
        probe, with ``probe_greedy``)."""
        rate = self.success_rate(task) if task is not None else None
        if self.rule == "linear":
            return self.max_level * (1.0 - (rate or 0.0)), False
        if rate is None or rate > self.threshold:
            return 0.0, False
        if self.probe and task is not None:
            with self._lock:
                n = self._explored[task] = self._explored.get(task, 0) + 1
            if n % self.probe == 0:  # a probe: the policy's own success decides when it stops
                return 0.0, self.probe_greedy
        return self.max_level, False

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
