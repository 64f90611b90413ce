"""The collector's copies of the policies a trainer learns, kept at the newest published weights.

The trainer thread owns the live (learning) policies; a collector thread acts with its own copy
of each, one version at a time. After every iteration the trainer `publish`es a roster (each
member's weights and version, copied in the trainer thread); the collector thread applies the
newest roster between two batches (`current`), so no batch mixes two versions of a policy. A
member published without weights is acted with as built (a frozen policy: one object serves the
trainer and the collector, since it never changes). A member that leaves the roster keeps its
copy until the episodes it is playing end (they are stored, trained on by no one).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from devicerl.agents.base import Policy


@dataclass
class Published:
    """One member as the trainer publishes it to the collector."""

    weights: dict | None  #: None: act with what `make` returns as it is (frozen)
    version: int
    make: Callable[[], Policy]  #: a fresh acting copy
    #: settings of the acting copy that the trainer may change (e.g. PBT's exploration floor)
    configure: Callable[[Policy], None] | None = None


class ActingCopies:
    """A `devicerl.runtime.acting.collector.PolicySource` fed by `publish` (see the module doc)."""

    def __init__(self, roster: Mapping[str, Published] | None = None, version: int = 0) -> None:
        self.policies: dict[str, Policy] = {}
        self._roster: dict[str, Published] | None = dict(roster) if roster else None
        self._lock = threading.Lock()
        self._leaving: set[str] = set()
        #: the trainer's newest policy version (its iteration count)
        self.version = version
        self.published = threading.Event()

    # -- trainer thread -----------------------------------------------------------------------
    def publish(self, roster: Mapping[str, Published], version: int) -> None:
        """The members now (newest wins) and the trainer's policy ``version``."""
        with self._lock:
            self._roster = dict(roster)
            self.version = version
        self.published.set()

    # -- collector thread ---------------------------------------------------------------------
    def current(self, in_use: set[str]) -> dict[str, Policy]:
        """Apply the newest roster (new copies, new weights, departures whose episodes ended);
        returns the acting copies by name."""
        with self._lock:
            roster, self._roster = self._roster, None
        if roster is not None:
            for name, pub in roster.items():
                policy = self.policies.get(name)
                fresh = policy is None
                if policy is None:
                    policy = self.policies[name] = pub.make()
                if pub.weights is None:
                    policy.version = pub.version
                elif fresh or policy.version != pub.version:
                    policy.set_weights(pub.weights, pub.version)
                if pub.configure is not None:
                    pub.configure(policy)
            self._leaving = set(self.policies) - set(roster)
        for name in list(self._leaving):
            if name not in in_use:
                self.policies.pop(name, None)
                self._leaving.discard(name)
        return self.policies

    def wait_newer(self, version: int, stop: threading.Event) -> None:
        """Block until a version newer than ``version`` is published (or ``stop`` is set)."""
        while not stop.is_set() and self.version <= version:
            self.published.wait(0.2)
            self.published.clear()
