"""Scripted oracles: demonstrations for behaviour cloning (pre-training) and tests.

`SyntheticOracle` solves the synthetic tasks reading only what an agent sees (the instruction
and the UI elements), so its demonstrations are learnable from observations: tap the element
labelled X; to type W into X, tap X until it is focused, then type W.

`PlanOracle` follows the solution a device knows for its episode (`DeviceEnv.oracle`, e.g. the
web-skills pages of `devicerl.tasks.webskills`; the collector hands it to policies that declare
``uses_oracle``, never through the observation): taps of elements by DOM id (at their centre,
where the small agent taps), options of an open ``<select>`` picker by their text, texts to
type, Enter, and taps and drags at free points. Where a device has no solution it falls back to
`SyntheticOracle`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from devicerl.actions import Action, ActionType
from devicerl.agents.base import ActionSample, Policy
from devicerl.records import Observation

_TAP_RE = re.compile(r"^Tap the box labelled (\w+)$")
_TYPE_RE = re.compile(r"^Type (\w+) into the box labelled (\w+)$")
_COUNT = "How many boxes are there? Answer with the number."


class SyntheticOracle(Policy):
    """Solves ``synthetic/tap``, ``synthetic/type`` and ``synthetic/answer`` (it answers the
    number of listed boxes); says "impossible" otherwise."""

    def _one(self, obs: Observation) -> Action:
        if obs.instruction == _COUNT:
            return Action.answer(str(len(obs.elements)))
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

    def act(
        self,
        observations: Sequence[Observation],
        greedy: bool = False,
        epsilon: Sequence[float] | None = None,
    ) -> list[ActionSample]:
        return [ActionSample(self._one(o), log_prob=0.0) for o in observations]


def _plan_action(obs: Observation, step: dict) -> Action:
    """One plan step on the current screen (impossible when its element is not shown):

    - ``tap``: DOM id: tap the centre of the element whose ``id`` attribute it is;
    - ``pick``: text: tap the centre of the shown option (role ``option``, e.g. a row of the
      browser device's ``<select>`` picker, which has no id) whose text it is;
    - ``type``: text to type; ``enter``: press Enter;
    - ``point``: [x, y], ``drag``: [x0, y0, x1, y1]: free points, in screen pixels.
    """
    if "type" in step:
        return Action.type_text(str(step["type"]))
    if step.get("enter"):
        return Action.enter()
    if "point" in step:
        return Action.tap(*obs.to_normalised(*step["point"]))
    if "drag" in step:
        x0, y0, x1, y1 = step["drag"]
        return Action.swipe(*obs.to_normalised(x0, y0), *obs.to_normalised(x1, y1))
    if "pick" in step:
        text = str(step["pick"])
        target = next((e for e in obs.elements if e.role == "option" and e.text == text), None)
    elif "tap" in step:
        target = next((e for e in obs.elements if e.attrs.get("id") == step["tap"]), None)
    else:
        return Action.impossible()
    if target is None:
        return Action.impossible()
    return Action.tap(*obs.to_normalised(*target.center))


class PlanOracle(SyntheticOracle):
    """Follows the device's plan, one step per action taken so far (the collector passes the
    episode's earlier actions, ``uses_history``, and its plan, ``uses_oracle``);
    `SyntheticOracle` where there is no plan. After the plan's last step it declares the task
    complete."""

    uses_history = True
    uses_oracle = True

    def act(
        self,
        observations: Sequence[Observation],
        greedy: bool = False,
        epsilon: Sequence[float] | None = None,
        oracle: Sequence[Any] | None = None,
    ) -> list[ActionSample]:
        plans = list(oracle) if oracle is not None else [None] * len(observations)
        return [ActionSample(self._follow(o, p), log_prob=0.0) for o, p in zip(observations, plans)]

    def _follow(self, obs: Observation, plan: Any) -> Action:
        if not plan:
            return self._one(obs)
        done = len(obs.previous_actions)
        if done >= len(plan):
            return Action(ActionType.STATUS_TASK_COMPLETE)
        return _plan_action(obs, plan[done])
