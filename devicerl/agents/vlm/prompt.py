"""The vision-language agent's chat for one step, in the model's own chat template.

The agent's codec (`devicerl.codecs`, ``VLMConfig.codec``) writes the chat: the action space
as its family was trained to read it (a system message, or a tool description), the
instruction, the last ``history`` of ``Observation.previous_actions`` as the family writes its
history, optionally the UI elements (at most `MAX_ELEMENTS`, points in the codec's frame), and
the screenshot (``{"type": "image"}``). The model's chat template turns the messages into
tokens, so any family's own turn format (Qwen's ``<|im_start|>``, Idefics3's ``User:``, Gemma's
``<start_of_turn>``) is respected.

Chat templates without a system role (one that raises on a system message or drops it) get
the instructions at the top of the first user turn instead (`devicerl.codecs.fold_system`):
`template_keeps_system` tries the processor's template once.
"""

from __future__ import annotations

from typing import Any

from devicerl.codecs import message

#: Longest UI element list in a prompt (with ``include_elements``).
MAX_ELEMENTS = 30

#: Stands for the instructions when a chat template is tried (`template_keeps_system`).
_PROBE = "devicerl-system-probe-7f3a"


def template_keeps_system(processor: Any) -> bool:
    """True when the processor's chat template renders a system message's text (as such or
    folded into the first user turn, as Gemma 3's does). A template that raises on a system
    message ("System role not supported"), leaves its text out, or prints its content parts
    raw (a template that expects a plain string) is one without a system role: the agent then
    puts the instructions at the top of the user message."""
    chat = [message("system", _PROBE), message("user", "Next action:")]
    try:
        out = processor.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    except Exception:  # jinja's TemplateError, transformers' ValueError: no system role
        return False
    if isinstance(out, list):  # some processors return one prompt per chat
        out = out[0] if out else ""
    return isinstance(out, str) and _PROBE in out and f"'text': '{_PROBE}'" not in out
