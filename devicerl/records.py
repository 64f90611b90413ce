"""Tasks, observations, step results, steps and trajectories: the data every part of devicerl
shares. Task types live here, below the devices, so devices run tasks without importing the task
suites (`devicerl.tasks`), which sit above them.

The trajectory store's columns are derived from these fields (`devicerl.data.columns`): a new
field is stored, written and read with no other edit; field metadata names a column, narrows its
type or keeps a field out of the store where the derived default does not fit.

Pixel coordinates (element boxes, screen size) are in the screenshot's pixel space; actions use
normalised [0, 1] coordinates over the same screen.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

import numpy as np

from devicerl.actions import Action, ActionType
from devicerl.errors import TaskError

#: Version of the Step/Trajectory schema; bump it when a field changes meaning.
SCHEMA_VERSION = 1


@dataclass
class UIElement:
    """One visible element of the screen (a DOM node or an Android view).

    ``bbox`` is (left, top, right, bottom) in screenshot pixels.
    """

    id: str
    role: str
    text: str = ""
    value: str = ""
    bbox: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    clickable: bool = False
    focused: bool = False
    editable: bool = False
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def center(self) -> tuple[float, float]:
        left, top, right, bottom = self.bbox
        return ((left + right) / 2.0, (top + bottom) / 2.0)

    @property
    def area(self) -> float:
        left, top, right, bottom = self.bbox
        return max(0.0, right - left) * max(0.0, bottom - top)

    def contains(self, x: float, y: float) -> bool:
        left, top, right, bottom = self.bbox
        return left <= x <= right and top <= y <= bottom


@dataclass
class Observation:
    """What the agent sees before acting.

    ``screenshot`` is an H x W x 3 uint8 array (None when the device was configured not to
    capture pixels, for speed). ``screen_size`` is (width, height) in the pixel space of the
    screenshot and of element boxes. ``previous_actions`` are the episode's actions before this
    observation, filled in for agents that read them (`Policy.uses_history`): by the collector
    when acting, by `Trajectory.agent_observation` when learning; devices and the store leave it
    empty. ``extras`` is free-form user data the framework never reads.
    """

    instruction: str = field(metadata={"column": "obs_instruction"})
    screen_size: tuple[int, int] = field(
        metadata={"columns": ("screen_width", "screen_height"), "column_type": "int32"}
    )
    screenshot: np.ndarray | None = None
    elements: list[UIElement] = field(default_factory=list)
    step: int = field(default=0, metadata={"column": "obs_step", "column_type": "int32"})
    previous_actions: tuple[Action, ...] = field(default=(), metadata={"store": False})
    extras: dict[str, Any] = field(default_factory=dict, metadata={"column": "obs_extras"})

    def __post_init__(self) -> None:
        if self.screenshot is not None:
            s = self.screenshot
            if s.dtype != np.uint8 or s.ndim != 3 or s.shape[2] != 3:
                raise ValueError(f"screenshot must be H x W x 3 uint8, got {s.shape} {s.dtype}")

    def to_pixels(self, x: float, y: float) -> tuple[float, float]:
        """Normalised [0, 1] coordinates to screen pixels."""
        w, h = self.screen_size
        return (x * w, y * h)

    def to_normalised(self, px: float, py: float) -> tuple[float, float]:
        """Screen pixels to normalised [0, 1] coordinates (clipped)."""
        w, h = self.screen_size
        return (min(max(px / w, 0.0), 1.0), min(max(py / h, 0.0), 1.0))

    def same_screen(self, other: Observation) -> bool:
        """True when ``other`` shows the same thing: instruction, UI elements and pixels
        (neither history nor ``extras`` are compared)."""
        if self.instruction != other.instruction or self.elements != other.elements:
            return False
        a, b = self.screenshot, other.screenshot
        return (a is None) == (b is None) and (a is None or np.array_equal(a, b))


#: The policy name of a single-policy run (a league of one).
DEFAULT_POLICY = "agent"


@dataclass(frozen=True)
class EpisodePlan:
    """What was decided for one episode before it started (`devicerl.runtime.acting.planning`):
    the league member that acts (``policy``; a single-policy run's is
    `DEFAULT_POLICY`), the exploration level every step acts with (``epsilon``: the share of
    uniform choice an agent mixes into each part of its action; 0: the agent's own), whether it
    acts greedily (``greedy``; None: as the collector is set), and the group it belongs to when
    episodes of one task instance run as a group (``group`` id, ``group_size``)."""

    policy: str = DEFAULT_POLICY
    epsilon: float = 0.0
    greedy: bool | None = None
    group: str | None = None
    group_size: int = field(default=1, metadata={"column_type": "int32"})


@dataclass(frozen=True)
class Task:
    """What to do on a device: a unique name (``suite/...``, e.g. ``miniwob/click-test`` or
    ``aitw/general/0042``), an optional fixed instruction (AitW lists) or none (the device
    generates it from the seed, as MiniWoB++ and the synthetic device do), a step budget, the
    name of the device that can run it, and suite-specific parameters."""

    name: str
    instruction: str | None = None
    max_steps: int = 10
    env: str | None = None
    params: dict[str, Any] = field(default_factory=dict, hash=False, compare=True)

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise TaskError(f"task name must be a non-empty string, got {self.name!r}")
        if self.max_steps < 1:
            raise TaskError(f"task {self.name}: max_steps must be >= 1, got {self.max_steps}")

    @property
    def suite(self) -> str:
        return self.name.split("/", 1)[0]

    @property
    def short_name(self) -> str:
        return self.name.split("/", 1)[-1]

    def with_max_steps(self, max_steps: int) -> Task:
        return Task(self.name, self.instruction, max_steps, self.env, dict(self.params))


@dataclass(frozen=True)
class TaskInstance:
    """A task plus the seed that makes its instance deterministic, and the plan of the episode
    that will run it (`devicerl.runtime.acting.planning` decides it; a plain sampler's is the
    default plan)."""

    task: Task
    seed: int
    plan: EpisodePlan = field(default_factory=EpisodePlan)


@dataclass
class TaskStatus:
    """The task's own verdict after an action (a device reports it; `DeviceEnv` turns it into
    the step's reward and episode flags)."""

    done: bool = False
    success: bool = False
    raw_reward: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)


class EndReason(str, Enum):
    """Why an episode ended."""

    SUCCESS = "success"  #: the task's success check (or the judge) says it was solved
    FAILURE = "failure"  #: the task itself ended without success (e.g. a wrong MiniWoB answer)
    AGENT_ENDED = "agent_ended"  #: the agent said complete/impossible and it was not solved
    MAX_STEPS = "max_steps"  #: the step budget ran out (counts as a failure for learning)
    TRUNCATED = "truncated"  #: infrastructure cut it short (crash, hang); not a failure


@dataclass
class StepResult:
    """What `DeviceEnv.step` returns (the gymnasium 5-tuple, with a typed observation)."""

    observation: Observation
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


@dataclass
class Step:
    """One transition: the observation the agent saw, its action and what followed.

    ``device_time_s`` is the time the device spent executing the action and observing;
    ``agent_time_s`` is the time the agent spent choosing it (its share of a batched call).
    """

    observation: Observation
    action: Action
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    text: str | None = None
    log_prob: float | None = None
    policy_version: int = 0
    agent_time_s: float = 0.0
    device_time_s: float = 0.0
    started_at: float = field(default=0.0, metadata={"column": "step_started_at"})
    verdict: dict[str, Any] | None = None


def with_previous_actions(obs: Observation, actions: Sequence[Action]) -> Observation:
    """A copy of `obs` whose ``previous_actions`` are `actions` (the stored observation is left
    as the device returned it)."""
    return replace(obs, previous_actions=tuple(actions))


@dataclass
class Judgement:
    """How a judge labelled an episode (`devicerl.judges.apply.apply_verdict`): the verdict it
    applied (``label``, ``reason``, ``step``, ``judge``, ...), what the device itself said, the
    steps cut after a per-step success, and why the learner judged it (its rollout group was
    lost)."""

    verdict: dict[str, Any]
    native_success: bool
    native_end_reason: str | None = None
    cut_steps: int = 0
    rescued: str | None = None

    @property
    def labelled(self) -> bool:
        """False when the applied verdict is unknown (the judge could not tell)."""
        return self.verdict.get("label") != "unknown"


@dataclass
class Trajectory:
    """One episode, complete once ``end_reason`` is set. ``max_steps`` is the task's step
    budget H, ``plan`` what was decided for it before it started (None: collected without a
    planner, e.g. imported), ``phase`` why it was collected (``train`` or ``eval``),
    ``judgement`` how a judge relabelled it (None: the device's own labels). ``extras`` is
    free-form user data the framework never reads."""

    task: str
    instruction: str
    seed: int | None = None
    steps: list[Step] = field(default_factory=list)
    final_observation: Observation | None = None
    end_reason: EndReason | None = None
    truncation_cause: str | None = None
    success: bool = False
    episode_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    env_id: int | None = None
    device: str = ""
    reset_time_s: float = 0.0
    started_at: float = field(default_factory=time.time, metadata={"column": "episode_started_at"})
    ended_at: float | None = field(default=None, metadata={"column": "episode_ended_at"})
    schema_version: int = field(
        default=SCHEMA_VERSION, metadata={"column": "record_schema", "column_type": "int32"}
    )
    max_steps: int | None = field(default=None, metadata={"column_type": "int32"})
    plan: EpisodePlan | None = None
    phase: str = "train"
    #: stored as JSON; stores written while unknown verdicts could be replaced have one key more
    judgement: Judgement | None = field(
        default=None, metadata={"store": "json", "retired": ("replaced_unknown",)}
    )
    #: a human's success label (judge evaluation's ground truth), when someone gave one
    ground_truth: bool | None = None
    extras: dict[str, Any] = field(default_factory=dict, metadata={"column": "episode_extras"})

    @property
    def length(self) -> int:
        return len(self.steps)

    @property
    def total_reward(self) -> float:
        return float(sum(s.reward for s in self.steps))

    @property
    def is_complete(self) -> bool:
        return self.end_reason is not None

    @property
    def is_truncated(self) -> bool:
        """Cut short by infrastructure: exclude from success statistics and critic labels."""
        return self.end_reason is EndReason.TRUNCATED

    def agent_observation(self, index: int, observation: Observation | None = None) -> Observation:
        """Step `index`'s observation (or ``observation``, e.g. the next one while acting) as a
        history-reading agent sees it: with the episode's earlier actions (those of steps before
        `index`) in ``previous_actions``. The copy is kept with the trajectory (learners ask for
        the same steps again and again, and featurizers cache by object)."""
        cache = self.__dict__.setdefault("_agent_observations", {})
        obs = self.steps[index].observation if observation is None else observation
        hit = cache.get(index)
        if hit is None or hit[0] is not obs:
            hit = (obs, with_previous_actions(obs, [s.action for s in self.steps[:index]]))
            cache[index] = hit
        return hit[1]

    def answer_by(self, index: int) -> str | None:
        """The agent's answer as it stood after step ``index``: the text of the last ANSWER
        action up to it (an answer ends nothing and a later one replaces it, as in
        AndroidWorld); None when it has not answered."""
        if index < 0:
            index += len(self.steps)
        for step in reversed(self.steps[: index + 1]):
            if step.action.type is ActionType.ANSWER:
                return step.action.text
        return None

    @property
    def answer(self) -> str | None:
        """The episode's answer (the last ANSWER action's text), what a task's checker and a
        judge read; None when the agent never answered."""
        return self.answer_by(len(self.steps) - 1)

    @property
    def epsilon(self) -> float:
        """The exploration level the episode acted with (0 without a plan)."""
        return self.plan.epsilon if self.plan is not None else 0.0

    def is_noop(self, index: int) -> bool:
        """True when step ``index`` changed nothing: no reward, the episode went on, and the
        next observation shows the same screen as this one."""
        step = self.steps[index]
        if step.reward or step.terminated or step.truncated:
            return False
        after = self.steps[index + 1].observation if index + 1 < len(self.steps) else None
        after = self.final_observation if after is None else after
        return after is not None and step.observation.same_screen(after)

    def loop_steps(self) -> int:
        """How many steps were detours: whenever a step's screen is one an earlier kept step
        showed (`Observation.same_screen`), the steps from that earlier one up to this one led
        back to where they started. Counts what cutting every detour would drop (the last step
        and any rewarded step, with what came before it, always stay)."""
        kept: list[int] = []
        start = 0  # kept[:start] ends with a rewarded step: no loop reaches before it
        for i, step in enumerate(self.steps):
            for k in range(start, len(kept)):
                if self.steps[kept[k]].observation.same_screen(step.observation):
                    del kept[k:]
                    break
            kept.append(i)
            if step.reward:
                start = len(kept)
        return len(self.steps) - len(kept)

    @property
    def policy_version(self) -> int:
        """The oldest policy version that acted in this episode (0 when it has no steps)."""
        return min((s.policy_version for s in self.steps), default=0)

    @property
    def device_time_s(self) -> float:
        return self.reset_time_s + sum(s.device_time_s for s in self.steps)

    @property
    def agent_time_s(self) -> float:
        return sum(s.agent_time_s for s in self.steps)

    def end(self, reason: EndReason, *, success: bool | None = None, cause: str | None = None):
        """Close the episode. ``cause`` explains a truncation."""
        self.end_reason = reason
        self.success = (reason is EndReason.SUCCESS) if success is None else success
        self.truncation_cause = cause
        self.ended_at = time.time()
        return self

    def __repr__(self) -> str:
        reason = self.end_reason.value if self.end_reason else "running"
        return (
            f"Trajectory(task={self.task!r}, steps={self.length}, end={reason}, "
            f"success={self.success}, id={self.episode_id[:8]})"
        )
