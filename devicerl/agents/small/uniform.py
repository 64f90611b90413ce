"""The uniform baseline of the small agent: every part of its action drawn uniformly."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from devicerl.actions import Action, ActionType
from devicerl.agents.base import ActionSample, Policy
from devicerl.agents.small.config import SmallAgentConfig
from devicerl.agents.small.featurize import Featurizer
from devicerl.agents.small.heads.points import Points
from devicerl.agents.small.heads.span import span_text
from devicerl.agents.small.heads.swipes import Swipes, swipe_action
from devicerl.records import Observation


class UniformPolicy(Policy):
    """Uniform over everything the small agent with ``config`` can express: an allowed action
    type, then for a tap (or swipe, when allowed) a gesture, an element among all listed ones
    and for TYPE a span of instruction tokens (at most ``max_span`` long) - each part drawn
    uniformly, as the small agent factorises its choice. It is the fair random baseline of a
    learner using that agent.

    ``clickable_only`` restricts taps to elements flagged clickable. That flag is privileged
    DOM information (the page's own event handlers) that the learners do not get as a
    restriction, so a baseline with it is shown apart from the fair one.
    """

    def __init__(self, config: Any = None, seed: int = 0, clickable_only: bool = False) -> None:
        self.config = config or SmallAgentConfig()
        self.rng = random.Random(seed)
        self.clickable_only = clickable_only
        self.featurizer = Featurizer(self.config.features)
        self.swipes = Swipes.name in self.config.heads
        self.points = Points.name in self.config.heads

    def _types(self, meta: Any) -> list[ActionType]:
        allowed = self.config.allowed_types
        classes = [ActionType(t) for t in self.config.type_classes]
        types = [t for t in classes if allowed is None or t.value in allowed]
        gestures_anywhere = self.swipes or self.points
        no_tap = not (meta.elements or gestures_anywhere)
        return [
            t
            for t in types
            if not (t is ActionType.DUAL_POINT and no_tap)
            and not (t is ActionType.TYPE and not meta.token_spans)
        ]

    def _one(self, meta: Any) -> Action:
        types = self._types(meta)
        if not types:
            return Action.invalid("", "uniform agent: nothing to do on this screen")
        kind = self.rng.choice(types)
        if kind is ActionType.DUAL_POINT:
            gestures = ["tap"] if meta.elements else []
            gestures += list(Swipes.options) if self.swipes else []
            gestures += list(Points.options) if self.points else []
            gesture = self.rng.choice(gestures)
            if gesture == "point":  # a tap anywhere
                return Action.tap(self.rng.random(), self.rng.random())
            if gesture == "drag":  # from any point to any point
                return Action.swipe(*(self.rng.random() for _ in range(4)))
            if gesture != "tap":
                return swipe_action(gesture)
            index = list(range(len(meta.elements)))
            if self.clickable_only:
                index = [i for i in index if meta.elements[i].clickable] or index
            return Action.tap(*meta.tap_points[self.rng.choice(index)])
        if kind is ActionType.TYPE:
            n = len(meta.token_spans)
            spans = [(s, e) for s in range(n) for e in range(s, min(n, s + self.config.max_span))]
            return Action.type_text(span_text(meta, *self.rng.choice(spans)))
        return Action(kind)

    def act(
        self,
        observations: Sequence[Observation],
        greedy: bool = False,
        epsilon: Sequence[float] | None = None,
    ) -> list[ActionSample]:
        if not observations:
            return []
        metas = self.featurizer(list(observations)).meta
        return [ActionSample(self._one(m)) for m in metas]
