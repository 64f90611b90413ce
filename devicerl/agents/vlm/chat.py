"""The vision-language agent's prompt and action text as one object: the codec a chat export
writes with (`devicerl.data.chat.ChatCodec`), so a model fine-tuned on the export reads the
messages `VLMAgent.messages` builds and writes the actions `VLMAgent` parses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from devicerl.actions import Action
from devicerl.agents.vlm.prompt import MAX_ELEMENTS
from devicerl.codecs import ActionCodec, PromptStep, fold_system
from devicerl.codecs.json_actions import JSONCodec
from devicerl.records import Observation


@dataclass(frozen=True)
class JsonActionPrompt:
    """`VLMAgent`'s chat in devicerl's JSON actions (the ``json`` codec, a model family's
    default where it has no language of its own): the codec's instructions (``system``: custom
    ones), its user text (``history`` previous actions, the elements with
    ``include_elements``) and one JSON action. ``system_role`` False folds the instructions
    into the user turn, as the agent does for a chat template without a system role. The JSON
    frame is the screen's, so the image's geometry does not change the text."""

    history: int = 4
    include_elements: bool = False
    system: str | None = None
    system_role: bool = True
    name: str = "devicerl-json"
    codec: ActionCodec = field(default_factory=JSONCodec)

    def messages(self, obs: Observation, has_image: bool) -> list[dict[str, Any]]:
        geometry = self.codec.served_geometry(obs)
        previous = tuple(obs.previous_actions)[-self.history :] if self.history > 0 else ()
        elements = ""
        if self.include_elements and obs.elements:
            elements = self.codec.elements_text(obs, geometry, MAX_ELEMENTS)
        step = PromptStep(obs.instruction, geometry, previous, elements, has_image)
        chat = self.codec.chat(step, self.system or self.codec.system(geometry))
        return chat if self.system_role else fold_system(chat)

    def action_text(self, action: Action, obs: Observation) -> str:
        return self.codec.format(action, self.codec.served_geometry(obs))
