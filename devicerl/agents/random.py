"""A random policy: the baseline every learner must beat."""

from __future__ import annotations

import random
from collections.abc import Sequence

from devicerl.actions import Action
from devicerl.agents.base import ActionSample, Policy
from devicerl.records import Observation


class RandomPolicy(Policy):
    """Taps the centre of a random clickable element (or a random point when none is listed);
    with probability ``type_prob`` types a random word of the instruction instead."""

    def __init__(self, seed: int = 0, type_prob: float = 0.2) -> None:
        self.rng = random.Random(seed)
        self.type_prob = type_prob

    def _one(self, obs: Observation) -> Action:
        words = obs.instruction.split()
        if words and self.rng.random() < self.type_prob:
            return Action.type_text(self.rng.choice(words))
        targets = [e for e in obs.elements if e.clickable] or obs.elements
        if targets:
            cx, cy = self.rng.choice(targets).center
            return Action.tap(*obs.to_normalised(cx, cy))
        return Action.tap(self.rng.random(), self.rng.random())

    def act(
        self,
        observations: Sequence[Observation],
        greedy: bool = False,
        epsilon: Sequence[float] | None = None,
    ) -> list[ActionSample]:
        return [ActionSample(self._one(o)) for o in observations]
