"""The small agent's action as parts, built from its config (`devicerl.agents.small.heads`).

`Parts` holds the type head, the heads (element taps and instruction spans, which every agent
has, then those of ``heads`` in the registry's order) and a router for each type whose heads
have more than one option (DUAL_POINT always: the gesture). They are kept in one order, the
order in which they build their layers (weights are drawn from the agent's seed in it) and draw
their choices; a router comes just before the head that needs it. They compute their
distributions in another fixed order, the one the agent always computed them in (`compute`): it
decides how the gradients the parts send back into the encoder's states are summed, so a seeded
update stays the same to the last bit.

Scoring an action (`targets`, then `score`): its type's log-prob, plus, for a type with heads,
the log-prob of its path. While every head of the type is plain (the agent's first ones), the
one head that claims the action gives its path (exact, or its approximation: the smallest
element under an off-centre tap); otherwise every path of every head that gives the action
exactly is summed over, and when none does, the nearest paths are used (a point of the agent's
lattice, the closest instruction span), flagged inexact. What no path gives (an invalid action,
a type the type head lacks, a tap on a screen without elements) scores `UNREPRESENTABLE_LOG_PROB`
for that part: a constant, so stored actions the agent cannot express pull its weights nowhere.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from devicerl.actions import Action, ActionType
from devicerl.agents.capabilities import ActionKind
from devicerl.agents.small.config import SmallAgentConfig
from devicerl.agents.small.featurize import ObsMeta
from devicerl.agents.small.heads.base import Chosen, Draw, Head, Inputs, Target
from devicerl.agents.small.heads.router import Router, RouterDist, needs_router, router_spec
from devicerl.agents.small.heads.span import Span
from devicerl.agents.small.heads.tap import Tap
from devicerl.agents.small.heads.types import TypeHead
from devicerl.agents.small.registry import HEADS

#: Log-prob given to an action part the agent cannot express (see the module doc).
UNREPRESENTABLE_LOG_PROB = -50.0
#: The heads every agent has, before those of ``heads``.
CORE: tuple[type[Head], ...] = (Tap, Span)


@dataclass
class Forward:
    """Every part's distribution on one batch."""

    x: Inputs
    types: torch.Tensor  #: [B, classes] log-probs of the action type
    heads: dict[Head, Any]  #: each head's own distribution record
    routers: dict[ActionType, RouterDist]

    def of(self, kind: type[Head]) -> Any:
        """The distribution of the agent's head of class ``kind``."""
        return next(d for h, d in self.heads.items() if isinstance(h, kind))


@dataclass
class Targets:
    """What teacher forcing needs for one action: its type's output (None: the agent cannot
    produce it) and the paths that give it (see the module doc)."""

    type_index: int | None
    paths: list[tuple[Head, Target]] = dataclasses.field(default_factory=list)
    exact: bool = True
    note: str = ""
    summed: bool = False  #: summed over its paths, else scored along its one path


class _Drawn(Chosen):
    def __init__(self, parts: Parts, types: list[ActionType]) -> None:
        self.parts, self.types = parts, types
        self.options: dict[ActionType, list[tuple[Head | None, str]]] = {}

    def rows(self, head: Head, option: str) -> list[int]:
        t = head.action_type
        if t not in self.parts.routers:
            return [b for b, k in enumerate(self.types) if k is t]
        picked = self.options[t]  # its router draws before it (the parts' order)
        return [b for b, k in enumerate(self.types) if k is t and picked[b] == (head, option)]


class Parts:
    """The parts of a small agent with config ``cfg`` (see the module doc). ``cfg`` is the
    agent's config with the featurisation its heads need (`Head.features`)."""

    def __init__(self, cfg: SmallAgentConfig) -> None:
        classes = list(CORE)
        classes += [e.load() for n, e in HEADS.items() if n in cfg.heads or e.always]
        features = cfg.features
        for cls in classes:
            features = cls.features(features)
        self.cfg = cfg = dataclasses.replace(cfg, features=features)
        self.type = TypeHead(cfg)
        self.heads: list[Head] = [cls(cfg) for cls in classes]
        self.by_type: dict[ActionType, list[Head]] = defaultdict(list)
        for h in self.heads:
            if self.type.index(h.action_type) is None:
                classes = ", ".join(cfg.type_classes)
                raise ValueError(
                    f"head {h.name} makes {h.action_type.value} actions: not one of the type "
                    f"head's classes ({classes})"
                )
            self.by_type[h.action_type].append(h)
        self.routers: dict[ActionType, Router] = {}
        for t, hs in self.by_type.items():
            spec = router_spec(t)
            if needs_router(spec, hs):
                self.routers[t] = Router(t, spec, hs)
        #: Routers and heads in build and draw order (after the type head).
        self.order: list[Router | Head] = []
        seen: dict[ActionType, int] = defaultdict(int)
        for h in self.heads:
            t = h.action_type
            seen[t] += 1
            router = self.routers.get(t)
            due = router is not None and (router.spec.always or seen[t] == 2)
            if due and router not in self.order:
                self.order.append(router)  # type: ignore[arg-type]
            self.order.append(h)
        #: The order the parts compute their distributions in (see the module doc): the
        #: routers built in every agent, the heads beyond the first ones, the other routers
        #: (after them: a router reads its heads' availability), the first heads.
        always = [r for r in self.routers.values() if r.spec.always]
        self.compute: list[Router | Head] = [
            *always,
            *(h for h in self.heads if not h.plain),
            *(r for r in self.routers.values() if r not in always),
            *(h for h in self.heads if h.plain),
        ]
        self.uses_cells = any(h.uses_cells for h in self.heads)

    def build(self, host: nn.Module) -> None:
        """Create every part's layers on the network ``host``, in order."""
        d = self.cfg.d_model
        self.type.build(host, d)
        for part in self.order:
            if isinstance(part, Router):
                part.build(host, d)
            else:
                part.build(host)

    def kinds(self) -> frozenset[ActionKind]:
        """The kinds of action the agent can produce (the reach report's "agent has it")."""
        allowed = self.cfg.allowed_types

        def has(t: ActionType) -> bool:
            return self.type.index(t) is not None and (allowed is None or t.value in allowed)

        out = {k for h in self.heads if has(h.action_type) for k in h.expresses()}
        if has(ActionType.PRESS_ENTER):
            out.add(ActionKind.ENTER)
        fc = self.cfg.features
        if fc.screenshot_size is not None or fc.pixels:
            out.add(ActionKind.PIXELS)
        return frozenset(out)

    # -- distributions ---------------------------------------------------------------------
    def forward(self, x: Inputs) -> Forward:
        available = {h: h.available(x) for h in self.heads}
        heads: dict[Head, Any] = {}
        routers: dict[ActionType, RouterDist] = {}
        for part in self.compute:
            if isinstance(part, Router):
                routers[part.action_type] = part.forward(x, available)
            else:
                heads[part] = part.forward(x)
        reachable = {
            t: routers[t].available if t in routers else available[hs[0]].any(1)
            for t, hs in self.by_type.items()
        }
        return Forward(x, self.type.forward(x, reachable), heads, routers)

    def entropy(self, fwd: Forward) -> torch.Tensor:
        """[B] entropy of the type and of every choice the exploration floor covers."""
        total = self.type.entropy(fwd.types)
        for part in self.order:
            if isinstance(part, Router):
                e = part.entropy(fwd.routers[part.action_type])
            else:
                e = part.entropy(fwd.heads[part])
            if e is not None:
                total = total + e
        return total

    # -- acting ------------------------------------------------------------------------------
    def sample(self, fwd: Forward, draw: Draw) -> list[tuple[Action, dict[str, Any]]]:
        """One action per row (and its sample's extras), every part drawing in order."""
        early = {h: h.sample_early(fwd.x, fwd.heads[h], draw) for h in self.heads}
        types = self.type.sample(fwd.types, draw)
        chosen = _Drawn(self, types)
        drawn: dict[Head, Any] = {}
        for part in self.order:
            if isinstance(part, Router):
                chosen.options[part.action_type] = part.sample(fwd.routers[part.action_type], draw)
            else:
                drawn[part] = part.sample(fwd.x, fwd.heads[part], chosen, draw, early[part])
        return [self._action(meta, b, chosen, drawn) for b, meta in enumerate(fwd.x.metas)]

    def _action(self, meta: ObsMeta, b: int, chosen: _Drawn, drawn: dict[Head, Any]):
        t = chosen.types[b]
        extras: dict[str, Any] = {"type": t.value}
        if t not in self.by_type:
            return Action(t), extras
        router = self.routers.get(t)
        head: Head | None = self.by_type[t][0]
        option = head.options[0] if head is not None else ""
        if router is not None:
            head, option = chosen.options[t][b]
            extras[router.extras_key] = option
        if head is None:  # every option masked (a screen it can do nothing on)
            return Action.invalid("", f"small agent: no head for {option}"), extras
        action, more = head.action(meta, option, drawn[head], b)
        return action, {**extras, **more}

    # -- scoring -----------------------------------------------------------------------------
    def targets(self, meta: ObsMeta, action: Action) -> Targets:
        """The paths that give ``action`` on this observation (see the module doc)."""
        if action.type is ActionType.INVALID:
            return Targets(None, exact=False, note="invalid action")
        index = self.type.index(action.type)
        if index is None:
            return Targets(None, exact=False, note="not one of the type head's classes")
        heads = self.by_type.get(action.type, [])
        if not heads:
            return Targets(index)
        if all(h.plain for h in heads):
            for h in heads:
                found = h.nearest(meta, action)
                if found is not None:
                    return Targets(index, [(h, p) for p in found.paths], found.exact, found.note)
            return Targets(index, exact=False, note="no head claims it")
        exact = [(h, p) for h in heads for p in h.paths(meta, action)]
        if exact:
            return Targets(index, exact, summed=True)
        for group in ([h for h in heads if not h.plain], [h for h in heads if h.plain]):
            for h in group:
                found = h.nearest(meta, action)
                if found is not None and found.paths:
                    paths = [(h, p) for p in found.paths]
                    return Targets(index, paths, False, found.note, summed=True)
        return Targets(index, exact=False, note="no path", summed=True)

    def score(self, fwd: Forward, targets: Sequence[Targets]) -> torch.Tensor:
        """[B] log-probs of the actions ``targets`` describe (differentiable)."""
        floor = torch.tensor(UNREPRESENTABLE_LOG_PROB, device=fwd.types.device)
        ready = {
            h: h.prepare(fwd.x, fwd.heads[h], [(b, p) for b, tg in enumerate(targets)
                                                for g, p in tg.paths if g is h])
            for h in self.heads
        }  # fmt: skip
        out = []
        for b, tg in enumerate(targets):
            if tg.type_index is None:
                out.append(floor + 0.0 * fwd.types[b].sum())
                continue
            t = self.type.classes[tg.type_index]
            s = fwd.types[b, tg.type_index]
            router = self.routers.get(t)
            if t not in self.by_type:
                out.append(s)
                continue
            if not tg.summed:  # along its one path: type, option, the head's choices
                rest = None
                if tg.paths:
                    head, path = tg.paths[0]
                    if router is not None:
                        s = s + fwd.routers[t].log_p[b, router.index(head, path.option)]
                    rest = head.extend(fwd.heads[head], ready[head], b, path, s)
                out.append(s + floor if rest is None else rest)
                continue
            terms = []
            for head, path in tg.paths:
                prior = (
                    fwd.routers[t].log_p[b, router.index(head, path.option)]
                    if router is not None
                    else torch.zeros((), device=s.device)
                )
                term = head.extend(fwd.heads[head], ready[head], b, path, prior)
                if term is not None:
                    terms.append(term)
            out.append(s + (torch.stack(terms).logsumexp(0) if terms else floor))
        return torch.stack(out)

    @torch.no_grad()
    def quiet(self, fresh: set[str], new_types: set[ActionType], old: set[ActionType]) -> None:
        """After loading a saved agent that lacks some parts (``fresh``: their weight names),
        make the new choices start below the ones it had (`devicerl.agents.small.net`)."""
        self.type.quiet(new_types, old)
        for router in self.routers.values():
            router.quiet(fresh)
        for h in self.heads:
            router = self.routers.get(h.action_type)
            h.quiet(fresh, None if router is None else router.layer)


def small_agent_kinds(config: SmallAgentConfig) -> frozenset[ActionKind]:
    """The kinds of action a small agent with ``config`` can produce (`Parts.kinds`)."""
    return Parts(config).kinds()
