"""Clients for external services (OpenAI-compatible chat completions)."""

from devicerl.clients.chat import (
    CallBudget,
    ChatClient,
    ChatConfig,
    ChatError,
    ChatReply,
    call_budget,
    encode_image,
    image_part,
    text_part,
)

__all__ = [
    "CallBudget",
    "ChatClient",
    "ChatConfig",
    "ChatError",
    "ChatReply",
    "call_budget",
    "encode_image",
    "image_part",
    "text_part",
]
