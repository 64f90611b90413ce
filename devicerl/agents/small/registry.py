"""The heads a small agent may add to its action (``agent.small.heads``), by name.

A head is a way to produce an action of one type (`devicerl.agents.small.heads.base.Head`):
taps at any point, text from the page... This registry is where a new one is made known: one
line naming its class and saying what it does. It holds no torch code, so that reading a
config (and ``devicerl train --help``) stays light; the class is imported when an agent is
built. Heads are built, and draw their choices, in this order, after the ones every agent has
(element taps, instruction spans): a head added at the end leaves every saved agent as it was.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class HeadEntry:
    """One registered head: where its class is and what it does (the ``--help`` text)."""

    where: str  #: ``"module:Class"``
    help: str
    #: Built in every agent, listed or not: listing it makes its options available (the fixed
    #: swipes: agents without them still score a swipe, at its masked option, as they did).
    always: bool = False

    def load(self) -> Any:
        module, _, name = self.where.partition(":")
        return getattr(importlib.import_module(module), name)


#: name -> the head (its class and ``--help`` text); the order is the build order.
HEADS: dict[str, HeadEntry] = {
    "swipes": HeadEntry(
        "devicerl.agents.small.heads.swipes:Swipes",
        "four fixed swipes (up, down, left, right) from the screen centre",
        always=True,
    ),
    "points": HeadEntry(
        "devicerl.agents.small.heads.points:Points",
        "taps at any point and drags from any point to any point",
    ),
    "page_text": HeadEntry(
        "devicerl.agents.small.heads.page_text:PageText", "typed spans of an element's text"
    ),
    "free_text": HeadEntry(
        "devicerl.agents.small.heads.free_text:FreeText",
        "typed text of any kind, from a character decoder that copies instruction characters",
    ),
}
