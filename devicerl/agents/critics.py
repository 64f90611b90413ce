"""Value networks for DigiRL, built on the small agent's encoder.

- `StepCritic`: V(s_h, c) from a full observation (instruction + UI elements), with two heads
  whose minimum is the value (DigiRL's double critic against over-estimation). As in the
  reference, the two heads are separate MLPs (their own hidden layers and initialisation) over
  one shared encoder; the reference's encoder is frozen, ours trains with both heads (a
  from-scratch small encoder has nothing pre-trained to freeze), so the heads differ by their
  own weights and initial values, not by their input features.
- `InstructionCritic`: V_instr(c) from the instruction alone (the observation's elements and
  pixels are dropped), the probability that the current policy solves instruction c.

Both output logits; `values` applies the sigmoid (and the min over heads). They work with any
actor (small, AutoUI, ...): they only read observations.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch
from torch import nn

from devicerl.agents.small.config import FeatureConfig, SmallAgentConfig
from devicerl.agents.small.encoder import SmallEncoder
from devicerl.agents.small.featurize import Featurizer
from devicerl.records import Observation


def default_critic_config() -> SmallAgentConfig:
    """A smaller encoder than the actor's: values are easier to fit than policies. No history
    features: critics read the stored observations, which hold no earlier actions."""
    return SmallAgentConfig(
        d_model=64, n_layers=2, n_heads=4, d_ff=128, features=FeatureConfig(history=False)
    )


class Critic(nn.Module):
    """An encoder and ``heads`` separate value heads (MLPs) over its global state (logits)."""

    def __init__(self, config: SmallAgentConfig | None = None, heads: int = 1) -> None:
        super().__init__()
        self.config = config or default_critic_config()
        self.heads = heads
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.config.seed + 1000 * heads)
            self.encoder = SmallEncoder(self.config)
            d = self.config.d_model
            self.value_heads = nn.ModuleList(
                nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, 1)) for _ in range(heads)
            )
        self.featurizer = Featurizer(self.config.features, cache=True)

    def prepare(self, observations: Sequence[Observation]) -> list[Observation]:
        return list(observations)

    def forward(self, observations: Sequence[Observation]) -> torch.Tensor:
        """Logits, shape (N, heads)."""
        device = next(self.parameters()).device
        batch = self.featurizer(self.prepare(observations)).to(device)
        state = self.encoder(batch).global_state
        return torch.cat([head(state) for head in self.value_heads], dim=-1)

    def values(self, observations: Sequence[Observation]) -> torch.Tensor:
        """Success probabilities (N,), the minimum over heads; no gradient."""
        if not observations:
            return torch.zeros(0)
        with torch.no_grad():
            return torch.sigmoid(self(observations)).min(dim=-1).values.cpu()


class StepCritic(Critic):
    """V(s_h, c) with two heads (see the module doc)."""

    def __init__(self, config: SmallAgentConfig | None = None) -> None:
        super().__init__(config, heads=2)


class InstructionCritic(Critic):
    """V_instr(c): reads only the instruction."""

    def __init__(self, config: SmallAgentConfig | None = None) -> None:
        super().__init__(config, heads=1)
        self._blank: dict[str, Observation] = {}

    def prepare(self, observations: Sequence[Observation]) -> list[Observation]:
        out = []
        for o in observations:
            blank = self._blank.get(o.instruction)
            if blank is None:  # one cached blank observation per instruction
                blank = Observation(instruction=o.instruction, screen_size=(1, 1))
                if len(self._blank) > 50_000:
                    self._blank.clear()
                self._blank[o.instruction] = blank
            out.append(blank)
        return out


def critic_config_from(actor_config: SmallAgentConfig | None, **overrides) -> SmallAgentConfig:
    """A critic config with the actor's featurisation (so one token cache fits both), without
    history features (see `default_critic_config`)."""
    base = default_critic_config()
    if actor_config is not None:
        features = dataclasses.replace(actor_config.features, history=False)
        base = dataclasses.replace(base, features=features)
    return dataclasses.replace(base, **overrides) if overrides else base
