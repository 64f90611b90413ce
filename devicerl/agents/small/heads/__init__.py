"""The parts of the small agent's action (`base` says what a head is).

- `types`: the action type; `router`: the choice among one type's heads (the gesture, the
  text's source);
- heads every agent has: `tap` (an element's centre), `span` (a span of the instruction), and
  `swipes` (four fixed swipes, available when listed);
- heads a run adds (``agent.small.heads``, `devicerl.agents.small.registry`): `points` (taps
  at any point, drags), `page_text` (a span of an element's text), `free_text` (a character
  decoder).
"""
