"""A scripted oracle for the synthetic tasks: demonstrations for behaviour cloning and tests.

It reads only what an agent sees (the instruction and the UI elements), so its demonstrations
are learnable from observations: tap the element labelled X; to type W into X, tap X until it
is focused, then type W.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from devicerl.actions import Action
from devicerl.agents.base import ActionSample, Policy
from devicerl.records import Observation

_TAP_RE = re.compile(r"^Tap the box labelled (\w+)$")
_TYPE_RE = re.compile(r"^Type (\w+) into the box labelled (\w+)$")


class SyntheticOracle(Policy):
    """Solves ``synthetic/tap`` and ``synthetic/type``; answers "impossible" otherwise."""

    def _one(self, obs: Observation) -> Action:
        m = _TAP_RE.match(obs.instruction)
        word, label = (None, m.group(1)) if m else (None, None)
        m = _TYPE_RE.match(obs.instruction)
        if m:
            word, label = m.group(1), m.group(2)
        target = next((e for e in obs.elements if e.text == label), None)
        if target is None:
            return Action.impossible()
        if word is not None and target.focused:
            return Action.type_text(word)
        return Action.tap(*obs.to_normalised(*target.center))

    def act(self, observations: Sequence[Observation], greedy: bool = False) -> list[ActionSample]:
        return [ActionSample(self._one(o), log_prob=0.0) for o in observations]
