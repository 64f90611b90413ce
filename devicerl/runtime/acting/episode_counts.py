"""How finished episodes are counted: one rule and one set of metric names for every counter.

Three parts of a run count episodes, each for its own reason, and all of them with `EpisodeCounts`:
the collector (what acting produced in this process, `CollectorStats`), the trainer (what was
stored and trained on: its totals are checkpointed and survive a resume, `TrainState`) and an
evaluation (`EvalResult`). The pool below them counts steps and device faults, never episodes.
"""

from __future__ import annotations

from dataclasses import dataclass

from devicerl.judges.apply import is_labelled
from devicerl.records import Trajectory


@dataclass
class EpisodeCounts:
    """Complete, labelled episodes and their successes; truncated episodes (device faults, lost
    nodes) and episodes a judge could not label are counted apart, since neither says anything
    about the agent."""

    episodes: int = 0
    successes: int = 0
    truncated: int = 0
    unlabelled: int = 0

    def count(self, t: Trajectory) -> bool:
        """Count ``t``; True when it is a complete, labelled episode (one that may be learned
        from and enters the success rate)."""
        if t.is_truncated:
            self.truncated += 1
            return False
        if not is_labelled(t):
            self.unlabelled += 1
            return False
        self.episodes += 1
        self.successes += int(t.success)
        return True

    @property
    def success_rate(self) -> float:
        """Successes over complete, labelled episodes (0 before the first)."""
        return self.successes / self.episodes if self.episodes else 0.0

    def count_metrics(self) -> dict[str, float]:
        """The counters under the metric names a run logs (`devicerl.runtime.runs.metrics`)."""
        return {
            "rollout/episodes": self.episodes,
            "rollout/successes": self.successes,
            "rollout/truncated": self.truncated,
            "judge/unlabelled": self.unlabelled,
        }
