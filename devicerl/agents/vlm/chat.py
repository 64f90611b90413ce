"""The vision-language agent's prompt and action text as one object: the codec a chat export
writes with (`devicerl.data.chat.ChatCodec`), so a model fine-tuned on the export reads the
messages `VLMAgent.messages` builds and writes the actions `VLMAgent` parses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from devicerl.actions import Action
from devicerl.agents.vlm.prompt import MAX_ELEMENTS
from devicerl.codecs import ActionCodec, ImageGeometry, PromptStep, fold_system
from devicerl.codecs.json_actions import JSONCodec
from devicerl.records import Observation


@dataclass(frozen=True)
class CodecChat:
    """`VLMAgent`'s chat in one codec's language (``json`` by default, the agent's own where a
    family has none): the codec's instructions (``system``: custom ones), its user text
    (``history`` previous actions, the elements with ``include_elements``) and one action as
    the codec writes it. Coordinates are in the frame of the image the model is given: the
    screenshot resized to ``image_size`` when set (as the export writes it), then as the
    family's processor serves it. ``system_role`` False folds the instructions into the user
    turn, as the agent does for a chat template without a system role."""

    history: int = 4
    include_elements: bool = False
    image_size: tuple[int, int] | None = None
    system: str | None = None
    system_role: bool = True
    codec: ActionCodec = field(default_factory=JSONCodec)

    @property
    def name(self) -> str:
        return self.codec.name

    def geometry(self, obs: Observation) -> ImageGeometry:
        """The frame of the image the model sees for ``obs``."""
        if self.image_size is not None and obs.screenshot is not None:
            return self.codec.served(*self.image_size)
        return self.codec.served_geometry(obs)

    def messages(self, obs: Observation, has_image: bool) -> list[dict[str, Any]]:
        geometry = self.geometry(obs)
        previous = tuple(obs.previous_actions)[-self.history :] if self.history > 0 else ()
        elements = ""
        if self.include_elements and obs.elements:
            elements = self.codec.elements_text(obs, geometry, MAX_ELEMENTS)
        step = PromptStep(obs.instruction, geometry, previous, elements, has_image)
        chat = self.codec.chat(step, self.system or self.codec.system(geometry))
        return chat if self.system_role else fold_system(chat)

    def action_text(self, action: Action, obs: Observation) -> str:
        return self.codec.format(action, self.geometry(obs))
