"""Clients for external services (OpenAI-compatible chat completions)."""

from devicerl.clients.chat import (
    ChatClient,
    ChatConfig,
    ChatError,
    ChatReply,
    encode_image,
    image_part,
    text_part,
)

__all__ = [
    "ChatClient",
    "ChatConfig",
    "ChatError",
    "ChatReply",
    "encode_image",
    "image_part",
    "text_part",
]
