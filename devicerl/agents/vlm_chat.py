"""The vision-language agent's prompt and action text as one object: the codec a chat export
writes with (`devicerl.data.chat.ChatCodec`), so a model fine-tuned on the export reads the
messages `VLMAgent.messages` builds and writes the actions `VLMAgent` parses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devicerl.actions import Action
from devicerl.agents.vlm_prompt import chat_messages, format_action, system_text, user_text
from devicerl.records import Observation


@dataclass(frozen=True)
class JsonActionPrompt:
    """`VLMAgent`'s own language: its instructions (``system``: custom ones, else the generated
    `system_text`), its user text (``history`` previous actions, the elements with
    ``include_elements``) and one JSON action (`format_action`). ``system_role`` False folds the
    instructions into the user turn, as the agent does for a chat template without a system
    role."""

    history: int = 4
    include_elements: bool = False
    system: str | None = None
    system_role: bool = True
    name: str = "devicerl-json"

    def messages(self, obs: Observation, has_image: bool) -> list[dict[str, Any]]:
        text = user_text(obs, self.history, self.include_elements)
        return chat_messages(self.system or system_text(), text, has_image, self.system_role)

    def action_text(self, action: Action, obs: Observation) -> str:
        return format_action(action)
