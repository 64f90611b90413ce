"""GiGPO (Feng et al., arXiv 2505.10978): GRPO plus step-level groups.

GRPO's composition (`devicerl.algos.grpo`) with one more selection step after the episode
advantages: within a group, the steps whose observations are identical (anchor states: the same
instruction, UI elements and pixels, `devicerl.algos.selection.anchor_key`) form a step group;
a step's discounted return from there, R_t = sum_k gamma^k r_{t+k}, is compared within its step
group, A^S = (R_t - mean) / std (alone in its group: 0), and each step's advantage becomes
A = A^E + omega A^S (eq. 7, with the paper's omega = 1; ``gamma`` 0.95 as the paper).
"""

from __future__ import annotations

from devicerl.agents.base import Policy
from devicerl.algos.config import ActorConfig, GiGPOConfig, GRPOConfig
from devicerl.algos.grpo import GRPO
from devicerl.algos.selection import EveryStep, StepAdvantages


class GiGPO(GRPO):
    """The GiGPO learner: episode- and step-level group advantages, a clipped surrogate."""

    name = "gigpo"

    def __init__(
        self,
        actor: Policy,
        config: GRPOConfig,
        step_config: GiGPOConfig,
        actor_config: ActorConfig,
        seed: int = 0,
    ) -> None:
        super().__init__(actor, config, actor_config, seed)
        after = next(i for i, s in enumerate(self.selection) if isinstance(s, EveryStep)) + 1
        steps = StepAdvantages(step_config.gamma, config.normalise)
        self.selection.insert(after, steps)
