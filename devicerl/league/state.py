"""`League`: the named policies of a run, their frozen snapshots, and the regression gate.

Unlike RLlib's policy map, policies can be removed as well as added, and a snapshot is a deep
copy whose tensors share no storage with its source (RLlib's snapshots aliased live weights,
ray#16718): a `Frozen` policy refuses new weights and never enters an optimiser.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from devicerl.agents.base import ActionSample, Policy
from devicerl.errors import ConfigError
from devicerl.league.config import (
    FRONTIER_WINDOW,
    GATE_MARGIN,
    MAX_SNAPSHOTS,
    MEMBER_NAME,
    LeagueConfig,
    MappingRule,
    PolicySpec,
    SnapshotConfig,
    validate_league,
)
from devicerl.league.mapping import PolicyMapping
from devicerl.league.success import SuccessTable
from devicerl.records import Observation


def weights_hash(policy: Policy) -> str:
    """SHA-256 of a policy's published weights (names, shapes, dtypes and bytes), for tests
    and the league report: equal hashes mean equal weights."""
    digest = hashlib.sha256()
    for name, tensor in sorted(policy.get_weights().items()):
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
        digest.update(t.view(-1).view(dtype=_byte_dtype()).numpy().tobytes())
    return digest.hexdigest()


def _byte_dtype() -> Any:
    import torch

    return torch.uint8


class Frozen(Policy):
    """A policy that acts but never learns: a snapshot, a teacher, a regression gate."""

    trainable = False

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.version = inner.version
        self.uses_history = inner.uses_history
        self.temperature = inner.temperature
        train = getattr(inner, "train", None)
        if callable(train):
            train(False)  # no dropout while it acts

    def act(
        self,
        observations: Sequence[Observation],
        greedy: bool = False,
        epsilon: Sequence[float] | None = None,
    ) -> list[ActionSample]:
        return self.inner.act(observations, greedy)

    def log_prob(self, observations, actions, texts=None, **kwargs):  # type: ignore[no-untyped-def]
        """Teachers' log-probs (no gradient reaches the frozen weights)."""
        import torch

        with torch.no_grad():
            return self.inner.log_prob(observations, actions, texts, **kwargs)

    def get_weights(self) -> dict[str, Any]:
        return self.inner.get_weights()

    def set_weights(self, weights: Any, version: int | None = None) -> None:
        raise ConfigError("a frozen policy's weights cannot change")


@dataclass
class Member:
    """One policy of the league and where it came from."""

    name: str
    spec: PolicySpec
    policy: Policy
    #: The policy this one was copied from (a snapshot's source, a PBT exploit's donor).
    parent: str | None = None
    created_iteration: int = 0
    snapshot: bool = False
    #: Teacher -> student edges: policies whose kept episodes this one also learns from.
    teachers: list[str] = field(default_factory=list)


class League:
    """The policies of a run, added and removed while it runs."""

    def __init__(self, config: LeagueConfig | None = None, seed: int = 0) -> None:
        self.config = config or LeagueConfig()
        snap: SnapshotConfig = self.config.snapshot
        self.members: dict[str, Member] = {}
        self.success = SuccessTable(FRONTIER_WINDOW, snap.window)
        self.mapping = PolicyMapping(self.config.mapping, seed)
        self.iteration = 0
        self.counters: dict[str, int] = {"snapshots": 0, "added": 0, "removed": 0}
        self.history: list[dict[str, Any]] = []  # snapshots and PBT exploits, in order
        #: Episodes each policy played since its last snapshot (a snapshot needs a full window
        #: of new episodes: the pooled window itself is kept for PBT and the report).
        self.since_snapshot: dict[str, int] = {}

    @classmethod
    def build(
        cls, policies: dict[str, PolicySpec], config: LeagueConfig | None = None, seed: int = 0
    ) -> League:
        """A league of freshly built policies (each from its agent spec)."""
        config = config or LeagueConfig()
        validate_league(policies, config)
        league = cls(config, seed)
        if not config.mapping:
            league.mapping = PolicyMapping.from_policies(policies, seed)
        for name, spec in policies.items():
            league.add_member(name, spec, spec.agent.make(), teachers=list(spec.learn_from))
        return league

    # -- membership ---------------------------------------------------------------------------
    def add_member(
        self,
        name: str,
        spec: PolicySpec,
        policy: Policy,
        *,
        parent: str | None = None,
        snapshot: bool = False,
        teachers: list[str] | None = None,
    ) -> Member:
        """Add a policy (a frozen spec's policy is wrapped in `Frozen`)."""
        if not MEMBER_NAME.match(name):
            raise ConfigError(f"policies.{name}: a name is letters, digits, '_', '.', '@', '-'")
        if name in self.members:
            raise ConfigError(f"policies.{name}: already in the league")
        if not spec.trainable and not isinstance(policy, Frozen):
            policy = Frozen(policy)
        member = Member(name, spec, policy, parent, self.iteration, snapshot, list(teachers or []))
        self.members[name] = member
        self.counters["added"] += 1
        return member

    def remove(self, name: str) -> Member:
        """Remove a policy: its mapping rules, its success windows and teacher edges go too."""
        if name not in self.members:
            raise ConfigError(f"policies.{name}: not in the league")
        member = self.members.pop(name)
        self.mapping.remove_policy(name)
        self.success.drop(name)
        self.since_snapshot.pop(name, None)
        for other in self.members.values():
            if name in other.teachers:
                other.teachers.remove(name)
        self.counters["removed"] += 1
        return member

    def __getitem__(self, name: str) -> Member:
        return self.members[name]

    def __contains__(self, name: str) -> bool:
        return name in self.members

    def trainable(self) -> list[str]:
        return [n for n, m in self.members.items() if m.spec.trainable]

    def snapshots_of(self, name: str) -> list[str]:
        return [n for n, m in self.members.items() if m.snapshot and m.parent == name]

    # -- episodes -----------------------------------------------------------------------------
    def assign(self, task: str) -> str:
        """The policy that plays a new episode of ``task``."""
        return self.mapping.assign(task)

    def record(self, policy: str, task: str, success: bool) -> None:
        """A finished, labelled episode (unknown policies, e.g. removed mid-episode, are
        ignored: their episodes are no one's data any more)."""
        if policy in self.members:
            self.success.record(policy, task, success)
            self.since_snapshot[policy] = self.since_snapshot.get(policy, 0) + 1

    def destinations(self, policy: str) -> list[str]:
        """The replays a finished episode of ``policy`` goes to: its own (when it trains) and
        those of its students (policies with it in ``teachers``, which keep it only if their
        own filter does). A frozen policy's episodes with no student are dropped."""
        if policy not in self.members:
            return []
        own = [policy] if self.members[policy].spec.trainable else []
        students = [
            n
            for n, m in self.members.items()
            if n != policy and m.spec.trainable and policy in m.teachers
        ]
        return own + students

    # -- snapshots ----------------------------------------------------------------------------
    def snapshot(self, name: str) -> Member:
        """A frozen deep copy of ``name`` joins the league as ``name@<iteration>``."""
        source = self.members[name]
        clone = copy.deepcopy(source.policy)
        frozen_spec = dataclasses.replace(copy.deepcopy(source.spec), trainable=False)
        snap_name = f"{name}@{self.iteration}"
        suffix = 1
        while snap_name in self.members:
            snap_name, suffix = f"{name}@{self.iteration}.{suffix}", suffix + 1
        member = self.add_member(snap_name, frozen_spec, Frozen(clone), parent=name, snapshot=True)
        self.success.copy_policy(name, snap_name)
        self.counters["snapshots"] += 1
        rate, n = self.success.policy_rate(name)
        self.history.append(
            {"event": "snapshot", "iteration": self.iteration, "source": name,
             "snapshot": snap_name, "success": rate, "episodes": n}
        )  # fmt: skip
        old = self.snapshots_of(name)
        while len(old) > MAX_SNAPSHOTS:
            self.remove(old.pop(0))
        return member

    def maybe_snapshot(self) -> list[str]:
        """Snapshot every trainable policy whose success over its last ``window`` episodes is
        at or above the threshold, once per ``window`` new episodes. Returns the new names."""
        cfg = self.config.snapshot
        made = []
        for name in self.trainable():
            rate, n = self.success.policy_rate(name)
            fresh = self.since_snapshot.get(name, 0) >= cfg.window
            if rate is not None and n >= cfg.window and fresh and rate >= cfg.threshold:
                self.since_snapshot[name] = 0
                made.append(self.snapshot(name).name)
        return made

    def end_iteration(self) -> list[str]:
        """Count an iteration and take the snapshots it earned."""
        self.iteration += 1
        return self.maybe_snapshot()

    # -- regression gate ----------------------------------------------------------------------
    def regression_report(
        self, generalist: str | None = None, margin: float | None = None
    ) -> list[dict[str, Any]]:
        """Tasks where ``generalist`` is below the best snapshot (of any policy) by more than
        ``margin``: ``{task, generalist, snapshot, snapshot_success, gap}``, worst first."""
        generalist = generalist or self.config.generalist
        margin = GATE_MARGIN if margin is None else margin
        if generalist not in self.members:
            raise ConfigError(f"league.generalist: unknown policy {generalist!r}")
        snaps = [n for n, m in self.members.items() if m.snapshot]
        out = []
        for task in self.success.tasks():
            mine = self.success.rate(generalist, task)
            rated = [(self.success.rate(s, task), s) for s in snaps]
            rated = [(r, s) for r, s in rated if r is not None]
            if mine is None or not rated:
                continue
            best, who = max(rated)
            if best - mine > margin:
                out.append(
                    {"task": task, "generalist": mine, "snapshot": who,
                     "snapshot_success": best, "gap": best - mine}
                )  # fmt: skip
        return sorted(out, key=lambda r: -r["gap"])

    def add_rule(self, policy: str, tasks: str = "*", weight: float = 1.0) -> None:
        """Route episodes of ``tasks`` to ``policy`` too."""
        if policy not in self.members:
            raise ConfigError(f"league.mapping: unknown policy {policy!r}")
        self.mapping.add_rule(MappingRule(policy, tasks, weight))
