"""A fast in-process device with ground-truth success, latency models and injected faults.

Tasks (``make("synthetic/<kind>")`` or ``reset("synthetic/<kind>")``; the suite's `Task`s are
defined in `devicerl.tasks.synthetic`):
- ``tap``: k labelled boxes; "Tap the box labelled X". Tapping X succeeds; with ``strict`` a
  tap on another box ends the episode as a failure.
- ``type``: k text boxes; "Type W into the box labelled X". Tap a box to focus it, then type:
  typing W into X succeeds; with ``strict`` typing into another box fails.
- ``steps``: any action is a step; the episode lasts L steps (L uniform in
  [min_len, max_len], from the seed) and succeeds with probability 1/2. For throughput
  benchmarks.
- ``answer``: 1 to k boxes; "How many boxes are there? Answer with the number." The task's
  check reads the episode's last answer (`DeviceEnv.answer`) after every step: the right
  number succeeds; a wrong one ends nothing (a later answer replaces it).

Beyond taps, swipes and typing: a long press is no tap (a box ignores it, as a button ignores
a long click), a wait changes nothing (nothing here changes with time), and OPEN_APP is an
invalid action (the device has no apps).

Boxes are drawn on the screenshot (with their label) and exposed as UI elements. Latencies
(constant, uniform, lognormal with occasional very slow resets) are simulated with sleeps.
Faults are drawn per step (and per reset if ``faults.on_reset``): the hosting process dies
(SIGKILL, only inside a pool worker, where ``DEVICERL_WORKER=1``; elsewhere it raises
`DeviceCrashed`), the step hangs for ``hang_s`` seconds, or the step raises `DeviceError`.
"""

from __future__ import annotations

import math
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from devicerl.actions import Action, ActionType
from devicerl.envs.base import DeviceEnv, TaskStatus
from devicerl.errors import ConfigError, DeviceCrashed, DeviceError
from devicerl.records import Observation, Task, UIElement

KINDS = ("tap", "type", "steps", "answer")
WORDS = (
    "apple", "river", "stone", "cloud", "tiger", "maple", "ocean", "piano", "lemon", "eagle",
    "frost", "amber", "coral", "delta", "ember", "flint", "grove", "honey", "ivory", "jade",
    "koala", "lotus", "mango", "nova",
)  # fmt: skip
_PALETTE = np.array(
    [[230, 25, 75], [60, 180, 75], [0, 130, 200], [245, 130, 48], [145, 30, 180],
     [70, 240, 240], [240, 50, 230], [210, 245, 60], [0, 128, 128], [170, 110, 40]],
    dtype=np.uint8,
)  # fmt: skip


@dataclass
class Latency:
    """A latency model in seconds.

    ``kind``: ``zero``, ``constant`` (``value``), ``uniform`` (``low``..``high``) or
    ``lognormal`` (``median``, ``sigma``). With probability ``slow_prob`` a draw is multiplied by
    ``slow_factor`` (occasional very slow resets).
    """

    kind: Literal["zero", "constant", "uniform", "lognormal"] = "zero"
    value: float = field(default=0.0, metadata={"min": 0})
    low: float = field(default=0.0, metadata={"min": 0})
    high: float = field(default=0.0, metadata={"min": 0})
    median: float = field(default=0.0, metadata={"min": 0})
    sigma: float = 1.0
    slow_prob: float = field(default=0.0, metadata={"min": 0, "max": 1})
    slow_factor: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in ("zero", "constant", "uniform", "lognormal"):
            raise ConfigError(f"unknown latency kind {self.kind!r}")
        numbers = (self.value, self.low, self.high, self.median, self.sigma, self.slow_factor)
        if not all(math.isfinite(v) for v in (*numbers, self.slow_prob)):
            raise ConfigError(f"latency parameters must be finite: {self}")
        if min(self.value, self.low, self.high, self.median, self.slow_prob) < 0:
            raise ConfigError(f"latency parameters must be >= 0: {self}")

    def sample(self, rng: np.random.Generator) -> float:
        if self.kind == "constant":
            t = self.value
        elif self.kind == "uniform":
            t = float(rng.uniform(self.low, self.high))
        elif self.kind == "lognormal":
            t = float(self.median * math.exp(self.sigma * rng.standard_normal()))
        else:
            t = 0.0
        if self.slow_prob > 0 and rng.random() < self.slow_prob:
            t *= self.slow_factor
        return t

    @property
    def mean(self) -> float:
        base = {
            "zero": 0.0,
            "constant": self.value,
            "uniform": (self.low + self.high) / 2,
            "lognormal": self.median * math.exp(self.sigma**2 / 2),
        }[self.kind]
        return base * (1 + self.slow_prob * (self.slow_factor - 1))

    @classmethod
    def parse(cls, spec: Latency | float | str | dict[str, Any] | None) -> Latency:
        """From a Latency, seconds, a dict of fields, or ``"uniform:0.05,0.3"``-style text."""
        if spec is None:
            return cls()
        if isinstance(spec, Latency):
            return spec
        if isinstance(spec, (int, float)):
            return cls("constant", value=float(spec))
        if isinstance(spec, dict):
            return cls(**spec)
        kind, _, args = str(spec).partition(":")
        try:
            nums = [float(a) for a in args.split(",") if a.strip()]
            if kind == "constant":
                return cls(kind, value=nums[0])
            if kind == "uniform":
                return cls(kind, low=nums[0], high=nums[1])
            if kind == "lognormal":
                return cls(kind, median=nums[0], sigma=nums[1] if len(nums) > 1 else 1.0)
            if kind == "zero":
                return cls()
            return cls("constant", value=float(kind))
        except (ValueError, IndexError):
            raise ConfigError(f"cannot parse latency {spec!r}") from None


@dataclass
class Faults:
    """Per-step fault probabilities (and per reset when ``on_reset``)."""

    die: float = field(
        default=0.0, metadata={"help": "the hosting process dies (SIGKILL)", "min": 0, "max": 1}
    )
    hang: float = field(
        default=0.0, metadata={"help": "the step hangs for hang_s seconds", "min": 0, "max": 1}
    )
    hang_s: float = field(default=3600.0, metadata={"help": "how long a hang lasts", "gt": 0})
    error: float = field(
        default=0.0, metadata={"help": "the step raises DeviceError", "min": 0, "max": 1}
    )
    on_reset: bool = field(default=False, metadata={"help": "resets draw faults too"})

    def inject(self, rng: np.random.Generator, where: str) -> None:
        if self.die == self.hang == self.error == 0:
            return
        u = rng.random()
        if u < self.die:
            if os.environ.get("DEVICERL_WORKER") == "1":
                os.kill(os.getpid(), signal.SIGKILL)
            raise DeviceCrashed(f"synthetic device: injected crash during {where}")
        if u < self.die + self.hang:
            time.sleep(self.hang_s)
        elif u < self.die + self.hang + self.error:
            raise DeviceError(f"synthetic device: injected error during {where}")


@dataclass
class _Box:
    label: str
    rect: tuple[int, int, int, int]
    color: np.ndarray
    value: str = ""


@dataclass
class _State:
    kind: str
    boxes: list[_Box]
    target: int
    word: str = ""
    length: int = 0
    lucky: bool = False
    focus: int | None = None
    done: bool = False
    success: bool = False
    instruction: str = ""
    dirty: bool = True
    info: dict[str, Any] = field(default_factory=dict)


_LATENCY_HELP = (
    "seconds a {what} takes: a number, uniform:LOW,HIGH, lognormal:MEDIAN,SIGMA, or a mapping "
    "of Latency's fields (slow_prob and slow_factor: occasional very slow ones)"
)


@dataclass
class SyntheticOptions:
    """The options of the synthetic device (`SyntheticEnv`)."""

    screen: tuple[int, int] = field(
        default=(270, 585), metadata={"help": "[width, height] in pixels (32 at least)"}
    )
    n_boxes: int = field(
        default=4, metadata={"help": "labelled boxes on a screen", "min": 1, "max": len(WORDS)}
    )
    step_latency: float | str | Latency = field(
        default=0.0, metadata={"help": _LATENCY_HELP.format(what="step")}
    )
    reset_latency: float | str | Latency = field(
        default=0.0, metadata={"help": _LATENCY_HELP.format(what="reset")}
    )
    faults: Faults = field(default_factory=Faults)
    render: bool = field(default=True, metadata={"help": "draw pixels (false: elements only)"})
    strict: bool = field(
        default=True, metadata={"help": "a tap on (or typing into) another box fails the task"}
    )
    min_len: int = field(default=1, metadata={"help": "shortest steps episode", "min": 1})
    max_len: int = field(default=10, metadata={"help": "longest steps episode", "min": 1})
    seed: int | None = field(
        default=None, metadata={"help": "seed of the latency and fault draws (null: fresh)"}
    )

    def __post_init__(self) -> None:
        if min(self.screen) < 32:
            raise ValueError(f"screen must be at least 32x32, got {list(self.screen)}")
        if self.min_len > self.max_len:
            raise ValueError(f"min_len {self.min_len} is more than max_len {self.max_len}")
        for name in ("step_latency", "reset_latency"):
            try:
                Latency.parse(getattr(self, name))
            except ConfigError as e:
                raise ValueError(f"{name}: {e}") from None


class SyntheticEnv(DeviceEnv):
    """The synthetic device. See the module doc for tasks, latencies and faults, and
    `SyntheticOptions` for its options."""

    name = "synthetic"
    unsupported = {ActionType.OPEN_APP: "the synthetic device has no apps to open"}

    def __init__(
        self, task: Task | str | None = "synthetic/tap", options: SyntheticOptions | None = None
    ) -> None:
        super().__init__(task)
        o = self.options = options if options is not None else SyntheticOptions()
        self.width, self.height = int(o.screen[0]), int(o.screen[1])
        self.n_boxes = o.n_boxes
        self.step_latency = Latency.parse(o.step_latency)
        self.reset_latency = Latency.parse(o.reset_latency)
        self.faults = o.faults
        self.render = o.render
        self.strict = o.strict
        self.min_len, self.max_len = o.min_len, o.max_len
        self._fault_rng = np.random.default_rng(o.seed)
        self._seed_rng = np.random.default_rng(o.seed)
        self._state: _State | None = None
        self._frame: np.ndarray | None = None

    @property
    def screen_size(self) -> tuple[int, int]:
        return (self.width, self.height)

    def _next_seed(self) -> int:
        return int(self._seed_rng.integers(2**31))

    # -- episode ----------------------------------------------------------------------------
    def reset(self, task: Task | str | None = None, seed: int | None = None) -> Observation:
        t0 = time.perf_counter()
        if self.faults.on_reset:
            self.faults.inject(self._fault_rng, "reset")
        delay = self.reset_latency.sample(self._fault_rng)
        if delay > 0:
            time.sleep(delay)
        obs = super().reset(task, seed)
        obs.extras["reset_time_s"] = time.perf_counter() - t0
        obs.extras["reset_latency_s"] = delay  # the simulated part, as drawn
        return obs

    def _step(self, action: Action) -> tuple[Observation, TaskStatus]:
        self.faults.inject(self._fault_rng, "step")
        delay = self.step_latency.sample(self._fault_rng)
        if delay > 0:
            time.sleep(delay)
        obs, status = super()._step(action)
        status.info["latency_s"] = delay  # the simulated part, as drawn
        return obs, status

    def _reset(self, task: Task, seed: int) -> Observation:
        kind = task.short_name.split("-", 1)[0]
        if kind not in KINDS:
            raise ConfigError(f"synthetic device: unknown task {task.name!r} (kinds: {KINDS})")
        rng = np.random.default_rng(seed)
        n = int(task.params.get("n_boxes", self.n_boxes))
        if kind == "answer":
            n = int(rng.integers(1, n + 1))
        labels = rng.choice(len(WORDS), size=n, replace=False)
        boxes = [
            _Box(WORDS[int(i)], rect, _PALETTE[int(rng.integers(len(_PALETTE)))])
            for i, rect in zip(labels, self._layout(rng, n))
        ]
        target = int(rng.integers(n))
        st = _State(kind=kind, boxes=boxes, target=target)
        label = boxes[target].label
        if kind == "tap":
            st.instruction = f"Tap the box labelled {label}"
        elif kind == "type":
            st.word = WORDS[int(rng.integers(len(WORDS)))]
            st.instruction = f"Type {st.word} into the box labelled {label}"
        elif kind == "answer":
            st.instruction = "How many boxes are there? Answer with the number."
        else:
            st.length = int(rng.integers(self.min_len, self.max_len + 1))
            st.lucky = bool(rng.random() < 0.5)
            st.instruction = f"Take {st.length} steps"
        self._state = st
        return self._observe()

    def _layout(self, rng: np.random.Generator, n: int) -> list[tuple[int, int, int, int]]:
        cols = 3
        rows = max(5, math.ceil(n / cols) + 1)
        cw, ch = self.width // cols, self.height // rows
        cells = rng.choice(cols * rows, size=n, replace=False)
        rects = []
        for c in cells:
            col, row = int(c) % cols, int(c) // cols
            pw, ph = int(rng.integers(2, max(3, cw // 6))), int(rng.integers(2, max(3, ch // 6)))
            left, top = col * cw + pw, row * ch + ph
            rects.append((left, top, left + cw - 2 * pw, top + ch - 2 * ph))
        return rects

    def _box_at(self, x: float, y: float) -> int | None:
        assert self._state is not None
        px, py = x * self.width, y * self.height
        for i, b in enumerate(self._state.boxes):
            left, top, right, bottom = b.rect
            if left <= px <= right and top <= py <= bottom:
                return i
        return None

    def _act(self, action: Action) -> None:
        st = self._state
        assert st is not None
        if st.kind in ("steps", "answer"):  # only the answer counts for an answer task
            return
        if action.type is ActionType.DUAL_POINT and action.is_tap:
            assert action.touch is not None
            hit = self._box_at(*action.touch)
            if hit is None:
                return
            st.dirty = True
            if st.kind == "tap":
                st.success = hit == st.target
                st.done = st.success or self.strict
            else:
                st.focus = hit
        elif action.type is ActionType.TYPE and st.kind == "type" and st.focus is not None:
            st.boxes[st.focus].value = action.text
            st.dirty = True
            if st.focus == st.target and action.text.strip() == st.word:
                st.success = st.done = True
            elif st.focus != st.target and self.strict:
                st.done = True

    def _status(self) -> TaskStatus:
        st = self._state
        assert st is not None
        if st.kind == "steps" and self.steps_taken + 1 >= st.length:
            st.done, st.success = True, st.lucky
        if st.kind == "answer" and self.answer is not None:
            st.done = st.success = self.answer.strip() == str(len(st.boxes))
        return TaskStatus(done=st.done, success=st.success, raw_reward=1.0 if st.success else 0.0)

    def _observe(self) -> Observation:
        st = self._state
        assert st is not None
        editable = st.kind == "type"
        elements = [
            UIElement(
                id=f"box{i}",
                role="textbox" if editable else "button",
                text=b.label,
                value=b.value,
                bbox=tuple(float(v) for v in b.rect),  # type: ignore[arg-type]
                clickable=True,
                focused=st.focus == i,
                editable=editable,
            )
            for i, b in enumerate(st.boxes)
        ]
        return Observation(
            instruction=st.instruction,
            screen_size=(self.width, self.height),
            screenshot=self._screenshot() if self.render else None,
            elements=elements,
            step=self.steps_taken,
            extras={"task": self.task.name if self.task else ""},
        )

    def _screenshot(self) -> np.ndarray:
        st = self._state
        assert st is not None
        if self._frame is not None and not st.dirty:
            return self._frame
        from PIL import Image, ImageDraw

        img = Image.new("RGB", (self.width, self.height), (240, 240, 240))
        draw = ImageDraw.Draw(img)
        for i, b in enumerate(st.boxes):
            outline = (0, 0, 0) if st.focus == i else None
            draw.rectangle(b.rect, fill=tuple(int(c) for c in b.color), outline=outline, width=3)
            draw.text((b.rect[0] + 4, b.rect[1] + 4), b.label, fill=(0, 0, 0))
            if b.value:
                draw.text((b.rect[0] + 4, b.rect[1] + 18), b.value, fill=(255, 255, 255))
        draw.text((4, 4), st.instruction, fill=(0, 0, 0))
        frame = np.asarray(img, dtype=np.uint8)
        frame.flags.writeable = False
        self._frame, st.dirty = frame, False
        return frame
