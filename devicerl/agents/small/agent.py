"""The small CPU agent: the default, trainable in minutes on a laptop.

An action is chosen in parts (`devicerl.agents.small.parts`): its type, over the type head's
classes (AitW's seven); for a type with heads, an option of its router (for DUAL_POINT the
gesture: a tap on an element, a fixed swipe, with ``points`` a tap at any point or a drag; for
TYPE the text's source: an instruction span, with ``page_text`` / ``free_text`` page text or the
character decoder); then that head's choices (the element, the span...). The log-prob of an
action is the sum of the log-probs of its parts, summed over every path that gives it.

`log_prob` accepts any `Action` (e.g. from stored data of another agent) and scores the paths
that produce it (`Parts.targets`): a tap off every element's centre is read as the smallest
element containing it (or the nearest point of the agent's lattice, with ``points``), typed text
absent from the instruction as its closest span; what the agent cannot express scores
`UNREPRESENTABLE_LOG_PROB` for that part. Log-probs use the agent's ``temperature`` both when
sampling and in `log_prob`, so they agree; ``greedy`` picks the arg-max of every part and still
reports its log-prob at that temperature.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from devicerl.actions import Action, ActionType
from devicerl.agents.base import ActionSample, check_batch
from devicerl.agents.capabilities import ActionKind
from devicerl.agents.small import saved
from devicerl.agents.small.config import SmallAgentConfig
from devicerl.agents.small.featurize import FeatureBatch, Featurizer, ObsMeta
from devicerl.agents.small.heads.base import Draw, Epsilon, Inputs
from devicerl.agents.small.net import SmallPolicyNet
from devicerl.agents.small.parts import UNREPRESENTABLE_LOG_PROB, Forward, Parts, Targets
from devicerl.agents.torch_policy import TorchPolicy, resolve_device
from devicerl.errors import DataError
from devicerl.records import Observation

#: Highest exploration level a collector may ask for (a policy that is all noise learns nothing).
MAX_EPSILON = 0.95
__all__ = ["MAX_EPSILON", "UNREPRESENTABLE_LOG_PROB", "SmallAgent"]


class SmallAgent(TorchPolicy):
    """The small transformer agent (see the module doc). ``SmallAgent(d_model=64, ...)`` or
    ``SmallAgent(SmallAgentConfig(...))``; ``SmallAgent.from_pretrained(dir)`` loads one.
    ``config`` is the one given, with the featurisation its heads need."""

    def __init__(
        self,
        config: SmallAgentConfig | None = None,
        device: str | torch.device = "cpu",
        **overrides: Any,
    ) -> None:
        cfg = config or SmallAgentConfig()
        if overrides:
            cfg = dataclasses.replace(cfg, **overrides)
        self.parts = Parts(cfg)
        self.config = cfg = self.parts.cfg
        self.temperature = cfg.temperature
        self.featurizer = Featurizer(cfg.features, types=self.parts.type.classes)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed)
            self.module = SmallPolicyNet(self.parts)
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
        return self.parts.kinds()

    # -- forward -------------------------------------------------------------------------------
    def featurize(self, observations: Sequence[Observation]) -> FeatureBatch:
        return self.featurizer(list(observations)).to(self.device)

    def forward(self, batch: FeatureBatch, epsilon: Epsilon | None = None) -> Forward:
        """Every part's distribution on ``batch`` (the configured floor unless ``epsilon``)."""
        floor = self.config.epsilon if epsilon is None else epsilon
        return self.parts.forward(Inputs(self.module(batch), batch, self.temperature, floor))

    def _epsilons(self, asked: Sequence[float] | None) -> Epsilon:
        """The floor of each observation: the configured one, raised to the level a collector
        asks for (its episode plan's ``epsilon``, `devicerl.runtime.acting.planning`)."""
        base = self.config.epsilon
        if asked is None:
            return base
        levels = [min(max(base, float(a)), MAX_EPSILON) for a in asked]
        return torch.tensor(levels, device=self.device).unsqueeze(-1)

    def targets(self, meta: ObsMeta, action: Action) -> Targets:
        """The paths that produce ``action`` on this observation (`Parts.targets`)."""
        return self.parts.targets(meta, action)

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
            fwd = self.forward(batch, self._epsilons(epsilon))
            made = self.parts.sample(fwd, Draw(greedy, self.generator))
            targets = [self.targets(m, a) for m, (a, _) in zip(batch.meta, made)]
            scores = self.parts.score(fwd, targets).tolist()
        return [ActionSample(a, None, float(s), extras) for (a, extras), s in zip(made, scores)]

    # -- scoring -----------------------------------------------------------------------------
    def entropy(self, observations: Sequence[Observation]) -> torch.Tensor:
        """Differentiable entropy (N,) of the action type plus that of every choice the
        exploration floor covers (the element; with ``points`` the gesture and the touch point;
        with a text-source choice the source), for an entropy bonus in training."""
        if not observations:
            return torch.zeros(0, device=self.device)
        return self.parts.entropy(self.forward(self.featurize(observations)))

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
        fwd = self.forward(batch, self._epsilons(epsilon) if floor else 0.0)
        targets = [self.targets(m, a) for m, a in zip(batch.meta, actions)]
        return self.parts.score(fwd, targets)

    # -- persistence -------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write ``model.safetensors`` and ``small_agent.json`` (`devicerl.agents.small.saved`)."""
        saved.write(path, self.config, self.version, self.module.state_dict())

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
        meta = saved.read_meta(src)  # a saved small agent, else a clear error
        weights, own = saved.read_weights(src, self.device), self.module.state_dict()
        extra = sorted(k for k in weights if k not in own)
        if extra:
            raise DataError(
                f"{src}: the saved agent has weights this config lacks ({', '.join(extra[:4])}"
                f"{', ...' if len(extra) > 4 else ''}): switch on the parts it was saved with"
            )
        for k, v in weights.items():
            if v.shape != own[k].shape:
                raise DataError(
                    f"{src}: weight {k} is {tuple(v.shape)} there, {tuple(own[k].shape)} here: "
                    "the saved agent's architecture settings must match this config's"
                )
        self.module.load_state_dict(weights, strict=False)
        fresh = sorted(k for k in own if k not in weights)
        classes = [t.value for t in self.parts.type.classes]
        before = set(saved.saved_config(meta, src).allowed_types or classes)
        new_types = set(self.config.allowed_types or classes) - before
        self.module.quiet(
            self.parts,
            set(fresh),
            {ActionType(t) for t in new_types},
            {ActionType(t) for t in before},
        )
        self.version = 0
        return fresh

    def load(self, path: str | Path) -> None:
        """Load weights saved by `save` (the architecture must match this agent's)."""
        meta = saved.read_meta(path)
        state = saved.read_weights(path, self.device)
        try:
            self.module.load_state_dict(state)
        except RuntimeError as e:
            detail = " ".join(str(e).split())  # one line
            detail = detail if len(detail) < 300 else detail[:297] + "..."
            raise DataError(f"{path}: weights do not fit this agent's config ({detail})") from None
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
        cfg = saved.saved_config(saved.read_meta(path), path)
        if overrides:
            cfg = dataclasses.replace(cfg, **overrides)
        agent = cls(cfg, device=device)
        agent.load(path)
        return agent
