"""The small CPU agent: the default, trainable in minutes on a laptop.

An action is chosen in parts: its type (over `VALID_TYPES`); for DUAL_POINT a gesture (tap, or
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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from devicerl.actions import VALID_TYPES, Action, ActionType
from devicerl.agents.base import ActionSample, check_batch
from devicerl.agents.capabilities import ActionKind, small_agent_kinds
from devicerl.agents.featurize import FeatureBatch, Featurizer, ObsMeta, tapped_elements
from devicerl.agents.small_net import (
    GESTURES,
    MASKED,
    HeadLogits,
    SmallAgentConfig,
    SmallPolicyNet,
)
from devicerl.agents.torch_policy import TorchPolicy, read_json, resolve_device, write_json
from devicerl.errors import DataError
from devicerl.records import Observation

#: Highest exploration floor a collector may ask for (a policy that is all noise learns nothing).
MAX_EXPLORE = 0.95
#: Log-prob given to an action part the agent cannot express (see the module doc).
UNREPRESENTABLE_LOG_PROB = -50.0
#: Swipes run from the screen centre, this far (normalised) in their direction.
SWIPE_LENGTH = 0.3
_SWIPE_VECTORS = {"up": (0.0, -1.0), "down": (0.0, 1.0), "left": (-1.0, 0.0), "right": (1.0, 0.0)}
WEIGHTS_FILE, CONFIG_FILE = "model.safetensors", "small_agent.json"
#: An exploration floor: one level for the batch, or one per observation ([B, 1] tensor).
Explore = float | torch.Tensor


@dataclass
class ActionTarget:
    """The choices that produce an action (None: that part is not used by the action)."""

    type_idx: int | None
    gesture: int | None = None
    elements: list[int] | None = None
    spans: list[tuple[int, int]] | None = None
    exact: bool = True
    note: str = ""


class HeadLogProbs(NamedTuple):
    type: torch.Tensor
    gesture: torch.Tensor
    element: torch.Tensor
    span: torch.Tensor  # [B, Li(start), Li(end)]: log p(start) + log p(end | start)


def with_floor(log_p: torch.Tensor, logits: torch.Tensor, eps: Explore) -> torch.Tensor:
    """log((1 - eps) p + eps u), u uniform over the options that are not masked (``eps``: one
    level, or one per row as a [B, 1] tensor)."""
    if isinstance(eps, float | int) and eps <= 0:
        return log_p
    valid = logits > MASKED / 2
    uniform = valid / valid.sum(-1, keepdim=True).clamp(min=1)
    mixed = (1 - eps) * log_p.exp() + eps * uniform
    return torch.where(valid, mixed.clamp(min=1e-30).log(), log_p)


def head_log_probs(logits: HeadLogits, temperature: float, explore: Explore = 0.0) -> HeadLogProbs:
    t = float(temperature)
    start = F.log_softmax(logits.start / t, -1)
    end = F.log_softmax(logits.end / t, -1)
    return HeadLogProbs(
        with_floor(F.log_softmax(logits.type / t, -1), logits.type, explore),
        F.log_softmax(logits.gesture / t, -1),
        with_floor(F.log_softmax(logits.element / t, -1), logits.element, explore),
        start.unsqueeze(-1) + end,
    )


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

    def head_log_probs(self, batch: FeatureBatch, explore: Explore | None = None) -> HeadLogProbs:
        floor = self.config.explore if explore is None else explore
        return head_log_probs(self.module(batch), self.temperature, floor)

    def _explore_levels(self, observations: Sequence[Observation]) -> Explore:
        """The exploration floor of each observation: the configured one, raised to the level a
        collector asks for in ``extras["explore"]`` (`devicerl.runtime.exploration`)."""
        base = self.config.explore
        asked = [o.extras.get("explore") for o in observations]
        if all(a is None for a in asked):
            return base
        levels = [min(max(base, float(a or 0.0)), MAX_EXPLORE) for a in asked]
        return torch.tensor(levels, device=self.device).unsqueeze(-1)

    # -- acting --------------------------------------------------------------------------------
    def act(self, observations: Sequence[Observation], greedy: bool = False) -> list[ActionSample]:
        if not observations:
            return []
        batch = self.featurize(observations)
        explore = self._explore_levels(observations)
        with torch.no_grad():
            lp = self.head_log_probs(batch, explore)
            choice = self._choose(lp, greedy)
        samples = []
        targets = []
        for b, meta in enumerate(batch.meta):
            action, extras = self._build(meta, *(int(c[b]) for c in choice))
            targets.append(self.action_target(meta, action))
            samples.append(ActionSample(action, None, 0.0, extras))
        scores = self._score(lp, targets)
        for s, v in zip(samples, scores.tolist()):
            s.log_prob = float(v)
            s.extras["policy_version"] = self.version
        return samples

    def _choose(self, lp: HeadLogProbs, greedy: bool) -> list[torch.Tensor]:
        def pick(logp: torch.Tensor) -> torch.Tensor:
            if greedy:
                return logp.argmax(-1)
            probs = logp.exp().float().cpu()
            return torch.multinomial(probs, 1, generator=self.generator).squeeze(-1)

        start = pick(lp.span.logsumexp(-1)).to(lp.span.device)
        rows = torch.arange(start.shape[0], device=lp.span.device)
        end_lp = lp.span[rows, start]
        return [pick(lp.type), pick(lp.gesture), pick(lp.element), start, pick(end_lp)]

    def _build(self, meta: ObsMeta, t: int, g: int, e: int, s: int, end: int):
        kind = VALID_TYPES[t]
        extras: dict[str, Any] = {"type": kind.value}
        if kind is ActionType.DUAL_POINT:
            extras["gesture"] = GESTURES[g]
            if g > 0:
                return swipe_action(GESTURES[g]), extras
            if not meta.elements:
                return Action.invalid("", "small agent: no element to tap"), extras
            extras["element"] = meta.elements[e].id
            return Action.tap(*meta.tap_points[e]), extras
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
        t = VALID_TYPES.index(action.type)
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
            return ActionTarget(t, spans=spans, exact=exact, note="" if exact else "typed text")
        return ActionTarget(t)

    def _score(self, lp: HeadLogProbs, targets: list[ActionTarget]) -> torch.Tensor:
        floor = torch.tensor(UNREPRESENTABLE_LOG_PROB, device=lp.type.device)
        out = []
        for b, tg in enumerate(targets):
            if tg.type_idx is None:
                out.append(floor + 0.0 * lp.type[b].sum())
                continue
            s = lp.type[b, tg.type_idx]
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
        choice (the parts the exploration floor covers), for an entropy bonus in training."""
        if not observations:
            return torch.zeros(0, device=self.device)
        lp = self.head_log_probs(self.featurize(observations))

        def ent(log_p: torch.Tensor) -> torch.Tensor:
            p = log_p.exp()
            return -(p * torch.where(p > 0, log_p, torch.zeros_like(log_p))).sum(-1)

        return ent(lp.type) + ent(lp.element)

    def log_prob(
        self,
        observations: Sequence[Observation],
        actions: Sequence[Action],
        texts: Sequence[str | None] | None = None,
    ) -> torch.Tensor:
        """Differentiable log-probs of ``actions`` (``texts`` is ignored: nothing is generated)."""
        check_batch(observations, actions, texts)
        if not observations:
            return torch.zeros(0, device=self.device)
        batch = self.featurize(observations)
        lp = self.head_log_probs(batch)
        targets = [self.action_target(m, a) for m, a in zip(batch.meta, actions)]
        return self._score(lp, targets)

    # -- persistence -------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write ``model.safetensors`` and ``small_agent.json`` (config + version) to ``path``."""
        from safetensors.torch import save_file

        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().cpu().contiguous() for k, v in self.module.state_dict().items()}
        save_file(state, str(out / WEIGHTS_FILE))
        cfg = self.config.to_dict()
        write_json(out / CONFIG_FILE, {"config": cfg, "version": self.version, "format": 1})

    def load(self, path: str | Path) -> None:
        """Load weights saved by `save` (the architecture must match this agent's)."""
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        src = Path(path)
        meta = read_json(src / CONFIG_FILE)
        try:
            state = load_file(str(src / WEIGHTS_FILE), device=str(self.device))
        except (OSError, SafetensorError) as e:
            raise DataError(f"{src / WEIGHTS_FILE}: cannot read weights ({e})") from None
        try:
            self.module.load_state_dict(state)
        except RuntimeError as e:
            raise DataError(f"{src}: weights do not fit this agent's config ({e})") from None
        self.version = int(meta.get("version", 0))

    @classmethod
    def from_pretrained(cls, path: str | Path, device: str | torch.device = "cpu") -> SmallAgent:
        """Build the agent from a saved directory's config, then load its weights."""
        meta = read_json(Path(path) / CONFIG_FILE)
        cfg = dict(meta.get("config", {}))
        if cfg.get("allowed_types") is not None:
            cfg["allowed_types"] = tuple(cfg["allowed_types"])
        features = dict(cfg.pop("features", {}))
        for newer in ("history", "role_mention"):  # saved before these features existed
            features.setdefault(newer, False)
        if features.get("screenshot_size") is not None:
            features["screenshot_size"] = tuple(features["screenshot_size"])
        try:
            config = SmallAgentConfig(**cfg, features=features)  # type: ignore[arg-type]
        except TypeError as e:
            raise DataError(f"{path}/{CONFIG_FILE}: unknown config field ({e})") from None
        agent = cls(config, device=device)
        agent.load(path)
        return agent
