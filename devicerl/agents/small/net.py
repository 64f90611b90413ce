"""The small agent's network: the encoder and every part's layers (`devicerl.agents.small.parts`).

The parts register their layers on it under the names their weights have in saved agents
(``type_head``, ``gesture_head``, ``elem_query``...), so its state dict is that of the agents
saved before the parts existed. It computes the encoder's states; the parts read them.
"""

from __future__ import annotations

import torch
from torch import nn

from devicerl.actions import ActionType
from devicerl.agents.small.encoder import Encoded, SmallEncoder
from devicerl.agents.small.featurize import FeatureBatch
from devicerl.agents.small.parts import Parts


class SmallPolicyNet(nn.Module):
    """The encoder, then every part's layers in the parts' order (see the module doc)."""

    def __init__(self, parts: Parts) -> None:
        super().__init__()
        self.cfg = parts.cfg
        self.encoder = SmallEncoder(parts.cfg, cells=parts.uses_cells)
        parts.build(self)

    def forward(self, batch: FeatureBatch) -> Encoded:
        return self.encoder(batch)

    @torch.no_grad()
    def quiet(
        self,
        parts: Parts,
        fresh: set[str],
        new_types: set[ActionType],
        old_types: set[ActionType],
    ) -> None:
        """After loading a saved agent that lacks some parts (`fresh`: their weight names), make
        the grown agent act as the saved one did until it learns otherwise. The pixel
        projections start at zero (element and cell states as without pixels). Each choice the
        saved agent did not have starts `QUIET_LOGIT` below one it had, whatever the state: a
        point tap or a drag below the element tap, page text and characters below instruction
        spans, an action type now allowed (`new_types`) below one of `old_types`. Greedy acts as
        before; sampling and exploration still reach the new choices."""
        for name in ("pixel_elems", "pixel_cells"):
            layer = getattr(self.encoder, name, None)
            if layer is not None and f"encoder.{name}.weight" in fresh:
                nn.init.zeros_(layer.weight)
                nn.init.zeros_(layer.bias)
        parts.quiet(fresh, new_types, old_types)
