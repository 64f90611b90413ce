"""A fixed dataset of MiniWoB++-like episodes, built in code from a seeded `random.Random`.

No device and no collector: four small page models (a row of buttons, a text field with a
submit button, a paragraph of links, a login form) produce the observations a browser device
would (`UIElement`s in a 160 x 210 screen, an instruction), and a scripted behaviour plays them
the way a learning policy does early on: some episodes solve the task, some end on a wrong
answer, some wander (taps on plain text, typing with no field focused, going back and forth
between fields) until the step budget runs out. Steps carry what the pool records (sparse
reward on the last step of a success, terminated / truncated flags, the acting log-prob and
policy version) and each trajectory its step budget (``max_steps=5``), closed with `Trajectory.end`.

Everything here depends only on the seed, so the fixtures' inputs never change.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from devicerl.actions import Action, ActionType
from devicerl.records import EndReason, EpisodePlan, Observation, Step, Trajectory, UIElement

SCREEN = (160, 210)  #: (width, height), as MiniWoB++'s screenshots
MAX_STEPS = 5
#: The page model each of the fixture's tasks uses (by default, one task per model).
KINDS = ("click-button", "enter-text", "click-link", "login-user")
DEFAULT_TASKS = tuple(f"miniwob/{k}" for k in KINDS)
# fmt: off
WORDS = (
    "submit", "okay", "yes", "no", "cancel", "next", "previous", "search", "login", "home",
    "apple", "river", "orange", "purple", "tiger", "window", "garden", "silver", "rocket",
    "forest", "yellow", "copper", "marble", "violet", "pencil", "ladder", "castle", "meadow",
)
NAMES = ("kanesha", "arlen", "bryce", "dalia", "esteban", "fiona", "gus", "hana", "ivo", "jolene")
# fmt: on


@dataclass
class Page:
    """A page model: its instruction, its elements in the current state, and what an action
    does to that state."""

    kind: str
    instruction: str
    #: Target words: the button / link to click, or the texts to type (field order).
    targets: list[str]
    #: Words on the page besides the targets (other buttons / links, distractors).
    others: list[str]
    focused: int | None = None
    values: list[str] = field(default_factory=list)
    done: bool = False
    success: bool = False

    # -- layout -----------------------------------------------------------------------------
    def elements(self) -> list[UIElement]:
        """The screen now (a fresh list: the device returns new objects every step)."""
        return ELEMENTS[self.kind](self)

    def observation(self, step: int) -> Observation:
        return Observation(self.instruction, SCREEN, None, self.elements(), step)

    # -- dynamics ---------------------------------------------------------------------------
    def apply(self, action: Action) -> None:
        """What the action does: a tap on a field focuses it, typing fills the focused field,
        a tap on a button / link ends the episode (solved or not), anything else changes
        nothing."""
        if action.type is ActionType.TYPE:
            if self.focused is not None:
                self.values[self.focused] += action.text
            return
        assert action.touch is not None
        x, y = action.touch[0] * SCREEN[0], action.touch[1] * SCREEN[1]
        hit = [e for e in self.elements() if e.contains(x, y)]
        if not hit:
            return
        e = min(hit, key=lambda el: el.area)
        if e.editable:
            self.focused = int(e.id.split("-")[1])
        elif e.role in ("button", "link"):
            self.done = True
            self.success = self._solved(e)

    def _solved(self, pressed: UIElement) -> bool:
        if self.kind in ("click-button", "click-link"):
            return pressed.text == self.targets[0]
        return self.values == self.targets


def _box(x: float, y: float, w: float, h: float) -> tuple[float, float, float, float]:
    return (float(x), float(y), float(x + w), float(y + h))


def _buttons(page: Page) -> list[UIElement]:
    out = [UIElement("h-0", "heading", "Click a button below", bbox=_box(4, 52, 152, 14))]
    words = sorted([*page.targets, *page.others], key=lambda w: WORDS.index(w))
    for i, w in enumerate(words):
        box = _box(8 + 50 * (i % 3), 74 + 26 * (i // 3), 44, 20)
        out.append(UIElement(f"b-{i}", "button", w, bbox=box, clickable=True))
    return out


def _links(page: Page) -> list[UIElement]:
    out = []
    words = sorted([*page.targets, *page.others], key=lambda w: WORDS.index(w))
    for i, w in enumerate(words):
        y = 56 + 18 * i
        out.append(UIElement(f"p-{i}", "text", f"Some text about {w}", bbox=_box(4, y, 90, 14)))
        out.append(UIElement(f"a-{i}", "link", w, bbox=_box(98, y, 40, 14), clickable=True))
    return out


def _field(i: int, page: Page, box: tuple[float, float, float, float]) -> UIElement:
    return UIElement(
        f"f-{i}",
        "textbox",
        value=page.values[i],
        bbox=box,
        clickable=True,
        focused=page.focused == i,
        editable=True,
    )


def _text_field(page: Page) -> list[UIElement]:
    return [
        _field(0, page, _box(10, 70, 120, 18)),
        UIElement("s-0", "button", "Submit", bbox=_box(10, 100, 50, 20), clickable=True),
    ]


def _login(page: Page) -> list[UIElement]:
    return [
        UIElement("l-0", "label", "Username", bbox=_box(10, 56, 60, 12)),
        _field(0, page, _box(10, 70, 120, 18)),
        UIElement("l-1", "label", "Password", bbox=_box(10, 96, 60, 12)),
        _field(1, page, _box(10, 110, 120, 18)),
        UIElement("s-0", "button", "Login", bbox=_box(10, 140, 50, 20), clickable=True),
    ]


ELEMENTS: dict[str, Callable[[Page], list[UIElement]]] = {
    "click-button": _buttons,
    "enter-text": _text_field,
    "click-link": _links,
    "login-user": _login,
}


def new_page(kind: str, rng: random.Random) -> Page:
    """A fresh instance of page ``kind``."""
    if kind in ("click-button", "click-link"):
        words = rng.sample(WORDS, rng.randint(3, 5))
        target, others = words[0], words[1:]
        what = "button" if kind == "click-button" else "link"
        text = f'Click on the "{target}" {what}.'
        return Page(kind, text, [target], others)
    if kind == "enter-text":
        target = rng.choice(WORDS + NAMES)
        text = f'Enter "{target}" into the text field and press Submit.'
        return Page(kind, text, [target], [], values=[""])
    user = rng.choice(NAMES)
    password = "".join(rng.choice("abcdefghjkmnpqrstuvwxyz23456789") for _ in range(4))
    text = f'Enter the username "{user}" and the password "{password}" into the text fields and '
    text += "press login."
    return Page(kind, text, [user, password], [], values=["", ""])


# -- the scripted behaviour -----------------------------------------------------------------
def _tap(e: UIElement) -> Action:
    x, y = e.center
    return Action.tap(x / SCREEN[0], y / SCREEN[1])


def _find(page: Page, pred: Callable[[UIElement], bool]) -> UIElement:
    return next(e for e in page.elements() if pred(e))


def _solution(page: Page) -> list[Callable[[Page], Action]]:
    """The actions that solve the page, each computed from the page as it is then."""
    if page.kind in ("click-button", "click-link"):
        role = "button" if page.kind == "click-button" else "link"
        return [lambda p: _tap(_find(p, lambda e: e.role == role and e.text == p.targets[0]))]
    out: list[Callable[[Page], Action]] = []
    for i, text in enumerate(page.targets):
        out.append(lambda p, i=i: _tap(_find(p, lambda e: e.id == f"f-{i}")))
        out.append(lambda p, text=text: Action.type_text(text))
    out.append(lambda p: _tap(_find(p, lambda e: e.role == "button")))
    return out


def _noop(page: Page, rng: random.Random) -> Action:
    """An action that changes nothing on this page: a tap on plain text or empty screen, or
    typing with no field focused (or, with one focused, a tap on the focused field)."""
    plain = [e for e in page.elements() if not e.clickable]
    if page.focused is not None:
        return _tap(_find(page, lambda e: e.id == f"f-{page.focused}"))
    if plain and rng.random() < 0.6:
        return _tap(rng.choice(plain))
    if page.kind in ("enter-text", "login-user") and rng.random() < 0.5:
        return Action.type_text(rng.choice(page.targets))
    return Action.tap(rng.uniform(0.1, 0.9), rng.uniform(0.85, 0.97))  # below the page


def _mistake(page: Page, rng: random.Random) -> Action:
    """A wrong final action: another button / link, or submitting a wrong value."""
    if page.kind in ("click-button", "click-link"):
        role = "button" if page.kind == "click-button" else "link"
        word = rng.choice(page.others)
        return _tap(_find(page, lambda e: e.role == role and e.text == word))
    return _tap(_find(page, lambda e: e.role == "button"))


def play(kind: str, rng: random.Random) -> tuple[Page, list[Action | Callable[[Page], Action]]]:
    """A page and the plan of one episode on it (some parts computed as the page changes)."""
    page = new_page(kind, rng)
    solve = _solution(page)
    mode = rng.choices(["solve", "detour", "wrong", "wander"], [4, 3, 3, 3])[0]
    plan: list[Action | Callable[[Page], Action]]
    if mode == "solve":
        plan = list(solve)
    elif mode == "detour":  # solved after a step that changes nothing
        at = rng.randrange(len(solve))
        plan = [*solve[:at], lambda p: _noop(p, rng), *solve[at:]]
    elif mode == "wrong":  # a wrong answer (typed text altered, or another target)
        if kind in ("enter-text", "login-user"):
            page.targets = [t + "x" if i == 0 else t for i, t in enumerate(page.targets)]
            plan = list(_solution(page))
            page.targets = [t[:-1] if i == 0 else t for i, t in enumerate(page.targets)]
        else:
            plan = [lambda p: _noop(p, rng)] * rng.randint(0, 2) + [lambda p: _mistake(p, rng)]
    else:  # no-ops and focus changes back and forth, until the step budget runs out
        fields = ["f-0", "f-1"] if kind == "login-user" else ["f-0"]
        plan = []
        for _ in range(MAX_STEPS):
            if kind in ("enter-text", "login-user") and rng.random() < 0.5:
                fid = rng.choice(fields)
                plan.append(lambda p, fid=fid: _tap(_find(p, lambda e: e.id == fid)))
            else:
                plan.append(lambda p: _noop(p, rng))
    return page, plan


def episode(task: str, kind: str, index: int, rng: random.Random) -> Trajectory:
    """One episode of ``task`` (page model ``kind``), as the pool would record it."""
    page, plan = play(kind, rng)
    seed = rng.randrange(1_000_000)
    t = Trajectory(
        task=task,
        instruction=page.instruction,
        seed=seed,
        episode_id=f"{rng.getrandbits(128):032x}",
        env_id=index % 3,
        device=f"fixture-{index % 3}",
        started_at=0.0,
        max_steps=MAX_STEPS,
    )
    version = rng.randint(0, 2)
    obs = page.observation(0)
    for i, item in enumerate(plan[:MAX_STEPS]):
        action = item(page) if callable(item) else item
        page.apply(action)
        nxt = page.observation(i + 1)
        last = page.done or i + 1 == MAX_STEPS
        step = Step(
            observation=obs,
            action=action,
            reward=1.0 if page.success else 0.0,
            terminated=page.done,
            truncated=not page.done and i + 1 == MAX_STEPS,
            log_prob=-round(rng.uniform(0.05, 6.0), 4),
            policy_version=version,
        )
        t.steps.append(step)
        obs = nxt
        version += int(rng.random() < 0.2)
        if last:
            break
    t.final_observation = obs
    if page.done:
        reason = EndReason.SUCCESS if page.success else EndReason.FAILURE
    else:
        reason = EndReason.MAX_STEPS
    t.end(reason, success=page.success)
    t.ended_at = 0.0
    return t


def trajectories(
    tasks: tuple[str, ...] = DEFAULT_TASKS, per_task: int = 12, seed: int = 0
) -> list[Trajectory]:
    """``per_task`` episodes of each task, interleaved (task i plays page model ``KINDS[i %
    4]``); the episodes of every other task carry the exploration level a collector gave
    them (``plan.epsilon``)."""
    rng = random.Random(seed)
    out = []
    for _ in range(per_task):
        for i, task in enumerate(tasks):
            t = episode(task, KINDS[i % len(KINDS)], len(out), rng)
            if i % 2 == 1:
                t.plan = EpisodePlan(epsilon=round(0.6 * rng.random(), 3))
            out.append(t)
    return out
