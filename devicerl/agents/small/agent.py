"""The small CPU agent: the default, trainable in minutes on a laptop.

An action is chosen in parts: its type (over `AITW_TYPES`); for DUAL_POINT a gesture (tap, or
a swipe up/down/left/right from the screen centre); for a tap, an element (the tap lands on its
centre); for TYPE, a span of instruction tokens (the typed text is the exact substring of the
instruction). The log-prob of an action is the sum of the log-probs of its parts.

`log_prob` accepts any `Action` (e.g. from stored data of another agent) and scores the choices
that produce it, summing over all choices that produce the same action (two elements with the
same centre, or a word that occurs twice in the instruction):

- tap: the elements whose tap point equals the action's point (exact). Otherwise the smallest
  element containing the point, else the element whose box is nearest to it (an approximation,
  flagged as inexact in `action_targets`). A page with no elements cannot be tapped: that part
  scores `UNREPRESENTABLE_LOG_PROB`.
- swipe: its direction (exact only for the agent's own swipe geometry).
- type: the spans whose text equals the typed text (exact); else a case-insensitive match of the
  stripped text; else the longest run of instruction tokens that matches the text's tokens;
  else the span part scores `UNREPRESENTABLE_LOG_PROB`.
- invalid actions cannot be produced by this agent and score `UNREPRESENTABLE_LOG_PROB`.

These constants carry no gradient, so stored actions the agent cannot express do not pull its
weights anywhere. Log-probs use the agent's ``temperature`` both when sampling and in
`log_prob`, so they agree; ``greedy`` picks the arg-max of every part and still reports its
log-prob at that temperature.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from devicerl.actions import AITW_TYPES, Action, ActionType
from devicerl.agents.base import ActionSample, check_batch
from devicerl.agents.capabilities import ActionKind, small_agent_kinds
from devicerl.agents.small.config import SmallAgentConfig
from devicerl.agents.small.featurize import FeatureBatch, Featurizer, ObsMeta, tapped_elements
from devicerl.agents.small.heads import (
    Alternatives,
    Epsilon,
    Extras,
    HeadLogProbs,
    build_point_action,
    build_text,
    dual_point_target,
    head_log_probs,
    lift_log_probs,
    points_of,
    score_alternatives,
    type_target,
    with_floor,
)
from devicerl.agents.small.net import (
    BASIC_GESTURES,
    DRAG,
    GESTURES,
    POINT,
    SmallPolicyNet,
)
from devicerl.agents.small.text import CharSource
from devicerl.agents.torch_policy import TorchPolicy, read_json, resolve_device, write_json
from devicerl.errors import DataError
from devicerl.records import Observation

#: Highest exploration level a collector may ask for (a policy that is all noise learns nothing).
MAX_EPSILON = 0.95
#: Log-prob given to an action part the agent cannot express (see the module doc).
UNREPRESENTABLE_LOG_PROB = -50.0
#: Swipes run from the screen centre, this far (normalised) in their direction.
SWIPE_LENGTH = 0.3
_SWIPE_VECTORS = {"up": (0.0, -1.0), "down": (0.0, 1.0), "left": (-1.0, 0.0), "right": (1.0, 0.0)}
WEIGHTS_FILE, CONFIG_FILE = "model.safetensors", "small_agent.json"
#: Version of the saved config's layout; `saved_config` reads every earlier one.
CONFIG_FORMAT = 2
__all__ = ["Epsilon", "HeadLogProbs", "SmallAgent", "head_log_probs", "with_floor"]


@dataclass
class ActionTarget:
    """The choices that produce an action (None: that part is not used by the action)."""

    type_idx: int | None
    gesture: int | None = None
    elements: list[int] | None = None
    spans: list[tuple[int, int]] | None = None
    exact: bool = True
    note: str = ""
    #: With the optional paths on: every path that gives the action (scored as their sum).
    alternatives: Alternatives | None = None


def swipe_action(direction: str) -> Action:
    dx, dy = _SWIPE_VECTORS[direction]
    h = SWIPE_LENGTH / 2
    return Action.swipe(0.5 - dx * h, 0.5 - dy * h, 0.5 + dx * h, 0.5 + dy * h)


def span_text(meta: ObsMeta, start: int, end: int) -> str:
    return meta.instruction[meta.token_spans[start][0] : meta.token_spans[end][1]]


def _type_target(meta: ObsMeta, text: str, max_span: int) -> tuple[list[tuple[int, int]], bool]:
    n = len(meta.token_spans)
    spans = [(s, e) for s in range(n) for e in range(s, min(n, s + max_span))]
    exact = [(s, e) for s, e in spans if span_text(meta, s, e) == text]
    if exact:
        return exact, True
    low = text.strip().lower()
    loose = [(s, e) for s, e in spans if low and span_text(meta, s, e).lower() == low]
    if loose:
        return loose, False
    words = [t.lower() for t in text.split()]
    toks = [meta.instruction[a:b].lower() for a, b in meta.token_spans]
    best: list[tuple[int, int]] = []
    for s, e in spans:
        seg = toks[s : e + 1]
        if all(t in words for t in seg) and (not best or e - s > best[0][1] - best[0][0]):
            best = [(s, e)]
    return best, False


def _unravel(flat: int, shape: torch.Size) -> list[int]:
    out = []
    for n in reversed(shape):
        flat, r = divmod(flat, int(n))
        out.append(r)
    return out[::-1]


class SmallAgent(TorchPolicy):
    """The small transformer agent (see the module doc). ``SmallAgent(d_model=64, ...)`` or
    ``SmallAgent(SmallAgentConfig(...))``; ``SmallAgent.from_pretrained(dir)`` loads one."""

    def __init__(
        self,
        config: SmallAgentConfig | None = None,
        device: str | torch.device = "cpu",
        **overrides: Any,
    ) -> None:
        cfg = config or SmallAgentConfig()
        if overrides:
            cfg = dataclasses.replace(cfg, **overrides)
        self.config = cfg
        self.temperature = cfg.temperature
        self.featurizer = Featurizer(cfg.features)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed)
            self.module = SmallPolicyNet(cfg)
        self.device = resolve_device(device)
        self.module.to(self.device).eval()
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self.version = 0

    @property
    def uses_history(self) -> bool:  # type: ignore[override]
        """True with ``features.history``: the agent reads the episode's earlier actions."""
        return self.config.features.history

    @property
    def action_kinds(self) -> frozenset[ActionKind]:
        """The kinds of action this agent can produce (the reach report's "agent has it")."""
        return small_agent_kinds(self.config)

    # -- forward -------------------------------------------------------------------------------
    def featurize(self, observations: Sequence[Observation]) -> FeatureBatch:
        return self.featurizer(list(observations)).to(self.device)

    def head_log_probs(self, batch: FeatureBatch, epsilon: Epsilon | None = None) -> HeadLogProbs:
        floor = self.config.epsilon if epsilon is None else epsilon
        return head_log_probs(self.module(batch), self.temperature, floor)

    def _epsilons(self, asked: Sequence[float] | None) -> Epsilon:
        """The floor of each observation: the configured one, raised to the level a collector
        asks for (its episode plan's ``epsilon``, `devicerl.runtime.acting.planning`)."""
        base = self.config.epsilon
        if asked is None:
            return base
        levels = [min(max(base, float(a)), MAX_EPSILON) for a in asked]
        return torch.tensor(levels, device=self.device).unsqueeze(-1)

    # -- acting --------------------------------------------------------------------------------
    def act(
        self,
        observations: Sequence[Observation],
        greedy: bool = False,
        epsilon: Sequence[float] | None = None,
    ) -> list[ActionSample]:
        if not observations:
            return []
        batch = self.featurize(observations)
        with torch.no_grad():
            lp = self.head_log_probs(batch, self._epsilons(epsilon))
            choice = self._choose(lp, greedy)
            more = self._choose_more(lp, batch.meta, choice, greedy)
        samples = []
        targets = []
        for b, meta in enumerate(batch.meta):
            action, extras = self._build(meta, *(int(c[b]) for c in choice), more[b])
            targets.append(self.action_target(meta, action))
            samples.append(ActionSample(action, None, 0.0, extras))
        with torch.no_grad():
            scores = self._score(lp, targets, batch.meta)
        for s, v in zip(samples, scores.tolist()):
            s.log_prob = float(v)
        return samples

    def _pick(self, logp: torch.Tensor, greedy: bool) -> torch.Tensor:
        if greedy:
            return logp.argmax(-1)
        probs = logp.exp().float().cpu()
        return torch.multinomial(probs, 1, generator=self.generator).squeeze(-1)

    def _choose(self, lp: HeadLogProbs, greedy: bool) -> list[torch.Tensor]:
        def pick(logp: torch.Tensor) -> torch.Tensor:
            return self._pick(logp, greedy)

        span = lp.span
        start = pick(span.logsumexp(-1)).to(span.device)
        rows = torch.arange(start.shape[0], device=span.device)
        end_lp = span[rows, start]
        return [pick(lp.type), pick(lp.gesture), pick(lp.element), start, pick(end_lp)]

    def _choose_more(
        self, lp: HeadLogProbs, metas: list[ObsMeta], choice: list[torch.Tensor], greedy: bool
    ) -> list[dict[str, Any]]:
        """The optional paths' choices per row: touch and lift points, text source, page span,
        free text (only the parts the chosen type and gesture use are drawn beyond the first)."""
        more: list[dict[str, Any]] = [{} for _ in metas]
        kinds = [AITW_TYPES[int(t)] for t in choice[0]]
        if lp.point is not None:
            k2 = lp.point.shape[-1]
            for b, flat in enumerate(self._pick(lp.point.flatten(1), greedy).tolist()):
                more[b]["touch"] = divmod(int(flat), k2)
            drags = [
                b
                for b, k in enumerate(kinds)
                if k is ActionType.DUAL_POINT and int(choice[1][b]) == DRAG
            ]
            if drags:
                xy = [points_of(metas[b], self.module)[more[b]["touch"]] for b in drags]
                touch = torch.from_numpy(np.asarray(xy, np.float32)).to(self.device)
                lift = lift_log_probs(self.module, lp, drags, touch, self.temperature)
                for b, flat in zip(drags, self._pick(lift.flatten(1), greedy).tolist()):
                    more[b]["lift"] = divmod(int(flat), k2)
        if lp.source is not None:
            for b, src in enumerate(self._pick(lp.source, greedy).tolist()):
                more[b]["source"] = int(src)
            if lp.page is not None:
                shape = lp.page.shape[1:]
                for b, flat in enumerate(self._pick(lp.page.flatten(1), greedy).tolist()):
                    more[b]["page"] = tuple(int(v) for v in _unravel(int(flat), shape))
            free = [
                b for b, k in enumerate(kinds) if k is ActionType.TYPE and more[b]["source"] == 2
            ]
            if free:
                assert self.module.chars is not None and lp.enc is not None
                src = CharSource(metas, self.device)
                mem = self.module.chars.memory(lp.enc.instr, src)
                texts = self.module.chars.sample(
                    lp.enc.global_state, mem, src, free, self.temperature, self.generator, greedy
                )
                for b, text in zip(free, texts):
                    more[b]["free"] = text
        return more

    def _build(self, meta: ObsMeta, t: int, g: int, e: int, s: int, end: int, more: dict[str, Any]):
        kind = AITW_TYPES[t]
        extras: dict[str, Any] = {"type": kind.value}
        if kind is ActionType.DUAL_POINT:
            extras["gesture"] = GESTURES[g]
            if g in (POINT, DRAG):  # a lift point is drawn for drags only
                return build_point_action(meta, self.module, more), extras
            if g > 0:
                return swipe_action(GESTURES[g]), extras
            if not meta.elements:
                return Action.invalid("", "small agent: no element to tap"), extras
            extras["element"] = meta.elements[e].id
            return Action.tap(*meta.tap_points[e]), extras
        if kind is ActionType.TYPE and "source" in more:
            extras["source"] = ("instruction", "page", "free")[more["source"]]
            if more["source"] > 0:
                return Action.type_text(build_text(meta, more)), extras
        if kind is ActionType.TYPE:
            if not meta.token_spans:
                return Action.invalid("", "small agent: empty instruction to type from"), extras
            extras["span"] = (s, end)
            return Action.type_text(span_text(meta, s, end)), extras
        return Action(kind), extras

    # -- scoring ---------------------------------------------------------------------------
    def action_target(self, meta: ObsMeta, action: Action) -> ActionTarget:
        """The choices that produce ``action`` on this observation (see the module doc)."""
        if action.type is ActionType.INVALID:
            return ActionTarget(None, exact=False, note="invalid action")
        t = AITW_TYPES.index(action.type)
        if action.type is ActionType.DUAL_POINT and self.config.point_actions:
            alt, exact, note = dual_point_target(meta, self.module, action, self._swipes)
            return ActionTarget(t, elements=alt.elements, exact=exact, note=note, alternatives=alt)
        if action.type is ActionType.DUAL_POINT:
            assert action.touch is not None
            if action.is_swipe:
                direction = action.swipe_direction or "up"
                exact = action == swipe_action(direction)
                return ActionTarget(t, GESTURES.index(direction), exact=exact, note="swipe")
            elements, exact, note = tapped_elements(
                meta.elements, meta.tap_points, meta.screen_size, *action.touch
            )
            return ActionTarget(t, 0, elements=elements, exact=exact, note=note)
        if action.type is ActionType.TYPE:
            spans, exact = _type_target(meta, action.text, self.config.max_span)
            if self.module.source_head is not None:
                alt, exact, note = type_target(meta, self.config, action.text, spans, exact)
                return ActionTarget(t, spans=alt.spans, exact=exact, note=note, alternatives=alt)
            return ActionTarget(t, spans=spans, exact=exact, note="" if exact else "typed text")
        return ActionTarget(t)

    @property
    def _swipes(self) -> dict[int, Action]:
        """The fixed swipes by gesture index (none when ``swipes`` is off)."""
        if not self.config.swipes:
            return {}
        return {g: swipe_action(GESTURES[g]) for g in range(1, BASIC_GESTURES)}

    def _score(
        self, lp: HeadLogProbs, targets: list[ActionTarget], metas: list[ObsMeta]
    ) -> torch.Tensor:
        floor = torch.tensor(UNREPRESENTABLE_LOG_PROB, device=lp.type.device)
        extras = Extras(self.module, lp, metas)
        extras.prepare(targets, self.temperature)
        out = []
        for b, tg in enumerate(targets):
            if tg.type_idx is None:
                out.append(floor + 0.0 * lp.type[b].sum())
                continue
            s = lp.type[b, tg.type_idx]
            if tg.alternatives is not None:
                kind = AITW_TYPES[tg.type_idx]
                rest = score_alternatives(lp, b, tg.alternatives, kind, extras)
                out.append(s + (floor if rest is None else rest))
                continue
            if tg.gesture is not None:
                s = s + lp.gesture[b, tg.gesture]
            if tg.elements is not None:
                s = s + (lp.element[b, tg.elements].logsumexp(0) if tg.elements else floor)
            if tg.spans is not None:
                if tg.spans:
                    starts, ends = zip(*tg.spans)
                    s = s + lp.span[b, list(starts), list(ends)].logsumexp(0)
                else:
                    s = s + floor
            out.append(s)
        return torch.stack(out)

    def entropy(self, observations: Sequence[Observation]) -> torch.Tensor:
        """Differentiable entropy (N,) of the action-type choice plus that of the element
        choice (the parts the exploration floor covers), for an entropy bonus in training; with
        ``point_actions`` also of the gesture and the touch point, with a text-source head also
        of the source."""
        if not observations:
            return torch.zeros(0, device=self.device)
        lp = self.head_log_probs(self.featurize(observations))

        def ent(log_p: torch.Tensor) -> torch.Tensor:
            p = log_p.exp()
            return -(p * torch.where(p > 0, log_p, torch.zeros_like(log_p))).sum(-1)

        total = ent(lp.type) + ent(lp.element)
        if lp.point is not None:
            total = total + ent(lp.gesture) + ent(lp.point.flatten(1))
        if lp.source is not None:
            total = total + ent(lp.source)
        return total

    def log_prob(
        self,
        observations: Sequence[Observation],
        actions: Sequence[Action],
        texts: Sequence[str | None] | None = None,
        *,
        floor: bool = True,
        epsilon: Sequence[float] | None = None,
    ) -> torch.Tensor:
        """Differentiable log-probs of ``actions`` (``texts`` is ignored: nothing is generated)
        under the floor the agent acts with (raised to ``epsilon`` per observation, as in
        `act`); ``floor=False``: under the network's own distribution, without any floor."""
        check_batch(observations, actions, texts)
        if not observations:
            return torch.zeros(0, device=self.device)
        batch = self.featurize(observations)
        lp = self.head_log_probs(batch, self._epsilons(epsilon) if floor else 0.0)
        targets = [self.action_target(m, a) for m, a in zip(batch.meta, actions)]
        return self._score(lp, targets, batch.meta)

    # -- persistence -------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write ``model.safetensors`` and ``small_agent.json`` (config + version) to ``path``."""
        from safetensors.torch import save_file

        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().cpu().contiguous() for k, v in self.module.state_dict().items()}
        save_file(state, str(out / WEIGHTS_FILE))
        cfg = self.config.to_dict()
        write_json(
            out / CONFIG_FILE, {"config": cfg, "version": self.version, "format": CONFIG_FORMAT}
        )

    def _read_weights(self, src: Path) -> dict[str, torch.Tensor]:
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            return load_file(str(src / WEIGHTS_FILE), device=str(self.device))
        except (OSError, SafetensorError) as e:
            raise DataError(f"{src / WEIGHTS_FILE}: cannot read weights ({e})") from None

    def load_matching(self, path: str | Path) -> list[str]:
        """Start this agent from a saved one that lacks some of its parts: every weight of
        the saved agent is loaded, and the weights it does not have (heads or pixel features
        this agent's config adds) start fresh, so that the grown agent first acts as the saved
        one did (`SmallPolicyNet.quiet`: the new choices start at a low fixed logit, the pixel
        projections at zero). Returns the names of the fresh weights.

        The saved agent must be a part of this one: a weight this agent lacks, or one of
        another shape (a different ``d_model``, feature set...), is refused (`DataError`)
        rather than dropped. The version starts at 0: this is a new agent."""
        src = Path(path)
        meta = read_json(src / CONFIG_FILE)  # a saved small agent, else a clear error
        saved, own = self._read_weights(src), self.module.state_dict()
        extra = sorted(k for k in saved if k not in own)
        if extra:
            raise DataError(
                f"{src}: the saved agent has weights this config lacks ({', '.join(extra[:4])}"
                f"{', ...' if len(extra) > 4 else ''}): switch on the parts it was saved with"
            )
        for k, v in saved.items():
            if v.shape != own[k].shape:
                raise DataError(
                    f"{src}: weight {k} is {tuple(v.shape)} there, {tuple(own[k].shape)} here: "
                    "the saved agent's architecture settings must match this config's"
                )
        self.module.load_state_dict(saved, strict=False)
        fresh = sorted(k for k in own if k not in saved)
        every = [t.value for t in AITW_TYPES]
        before = set(meta.get("config", {}).get("allowed_types") or every)
        new_types = set(self.config.allowed_types or every) - before
        self.module.quiet(
            set(fresh), {ActionType(t) for t in new_types}, {ActionType(t) for t in before}
        )
        self.version = 0
        return fresh

    def load(self, path: str | Path) -> None:
        """Load weights saved by `save` (the architecture must match this agent's)."""
        src = Path(path)
        meta = read_json(src / CONFIG_FILE)
        state = self._read_weights(src)
        try:
            self.module.load_state_dict(state)
        except RuntimeError as e:
            detail = " ".join(str(e).split())  # one line
            detail = detail if len(detail) < 300 else detail[:297] + "..."
            raise DataError(f"{src}: weights do not fit this agent's config ({detail})") from None
        self.version = int(meta.get("version", 0))

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        device: str | torch.device = "cpu",
        overrides: Mapping[str, Any] | None = None,
    ) -> SmallAgent:
        """Build the agent from a saved directory's config, then load its weights.
        ``overrides``: fields of `SmallAgentConfig` set on top of the saved ones (a run's
        ``agent.temperature``)."""
        cfg = saved_config(read_json(Path(path) / CONFIG_FILE), path)
        if overrides:
            cfg = dataclasses.replace(cfg, **overrides)
        agent = cls(cfg, device=device)
        agent.load(path)
        return agent


def saved_config(meta: dict[str, Any], path: str | Path) -> SmallAgentConfig:
    """The `SmallAgentConfig` of a saved agent's JSON, whatever its format: format 1 called the
    floor ``explore`` and had an ``explore_spans`` switch (always off in saved agents); agents
    saved before ``history`` and ``role_mention`` existed had them off."""
    cfg = dict(meta.get("config", {}))
    if int(meta.get("format", 1)) < 2:
        if "explore" in cfg:
            cfg["epsilon"] = cfg.pop("explore")
        if cfg.pop("explore_spans", False):
            raise DataError(f"{path}/{CONFIG_FILE}: explore_spans is no longer supported")
    if cfg.get("allowed_types") is not None:
        cfg["allowed_types"] = tuple(cfg["allowed_types"])
    features = dict(cfg.pop("features", {}))
    for newer in ("history", "role_mention"):
        features.setdefault(newer, False)
    if features.get("screenshot_size") is not None:
        features["screenshot_size"] = tuple(features["screenshot_size"])
    try:
        return SmallAgentConfig(**cfg, features=features)  # type: ignore[arg-type]
    except TypeError as e:
        raise DataError(f"{path}/{CONFIG_FILE}: unknown config field ({e})") from None
