"""The ``agent`` section of a run config an older version saved, carried to the layout that
`devicerl.agents.config.upgrade_saved_agent` (the newest merges) takes.

Each step is one landed change of the agent options, oldest first: an option renamed moves with
its value; an option that became a constant is dropped, and a saved value other than the one the
code now uses is logged in one line, but only where the run used it (the small agent's
architecture when the run built a new small agent, the API agent's options when it ran the API
agent...): elsewhere the value meant nothing. A malformed value that has to be read to be carried
over is a `ConfigError` naming its key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from devicerl.agents.config import (
    AUTOUI_FUSION_HEADS,
    AUTOUI_MAX_INPUT_TOKENS,
    AUTOUI_PRECISION,
)
from devicerl.agents.small.config import FeatureConfig, SmallAgentConfig
from devicerl.agents.vlm.config import RETIRED as VLM_RETIRED
from devicerl.agents.vlm.config import RETIRED_LORA, RETIRED_SERVER, SERVER_CHAT_KEYS
from devicerl.clients.chat import ChatClient, ChatConfig
from devicerl.config import (
    IGNORED,
    drop_retired,
    saved_flag,
    saved_move,
    saved_pop,
    saved_put,
    used_only,
)

#: Options renamed or moved inside ``agent``: old key -> today's (or the next layout's) key.
RENAMED = {
    "small.explore": "small.epsilon",
    "small.features.pixels": "small.pixels",
    "small.features.field_labels": "small.field_labels",
    "api.chat.temperature": "api.temperature",
}
#: The small agent's architecture options a run no longer chooses: today's agent takes
#: `SmallAgentConfig`'s defaults for them (``d_ff`` twice ``d_model``; the weights' ``seed`` is
#: ``agent.seed``).
SMALL_FIXED = ("dropout", "max_span", "n_heads", "quote_prior", "grid", "offsets", "max_chars")
FEATURES_FIXED = (
    "buckets", "pieces_per_word", "max_instr_tokens", "max_elements", "max_elem_ids",
    "screenshot_size", "overlap_features", "history", "role_mention", "dom_flags", "pixel_size",
    "instr_positions",
)  # fmt: skip
#: The API agent's options that became constants (`devicerl.agents.api`, `ChatClient`).
API_FIXED = {
    "image_format": "png",
    "max_elements": 50,
    "precision": 3,
    "chat.backoff_s": ChatClient.backoff_s,
    "chat.backoff_max_s": ChatClient.backoff_max_s,
    "chat.burst": 1,
    "chat.max_tokens": ChatClient.max_tokens,
    "chat.max_retries": 4,
    "include_screenshot": True,  # the screenshot goes whenever the device gives one
}
#: The Auto-UI options that became constants of the released checkpoint's shape.
AUTOUI_FIXED = {
    "max_input_tokens": AUTOUI_MAX_INPUT_TOKENS,
    "precision": AUTOUI_PRECISION,
    "fusion_heads": AUTOUI_FUSION_HEADS,
    "lora.dropout": 0.0,
}
#: The options of the VLM server's older nested ``chat`` block that are not its endpoint: the
#: client's defaults now (temperature and decoding length are the agent's own).
_CHAT = ChatConfig()
VLM_SERVER_CHAT_FIXED = {
    "timeout_s": _CHAT.timeout_s,
    "max_concurrency": _CHAT.max_concurrency,
    "max_retries": 4,
    "requests_per_minute": None,
    "temperature": IGNORED,
    "max_tokens": IGNORED,
}


def upgrade_older_agent(data: Mapping[str, Any], where: str = "agent.") -> dict[str, Any]:
    """``data``, a saved ``agent`` section, with the changes before the newest round applied."""
    out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in data.items()}
    for old, new in RENAMED.items():
        saved_move(out, old, new)
    kind = out.get("kind", "small")
    _clickable(out, where)
    _small(out, kind, where)
    _requests_per_minute(out, "api.chat")
    drop_retired(out, used_only(_under("api", API_FIXED), kind == "api"), where)
    autoui = _under("autoui", {**AUTOUI_FIXED, "seed": out.get("seed", 0)})
    drop_retired(out, used_only(autoui, kind == "autoui"), where)
    _vlm(out, kind == "vlm", where)
    return out


def _under(section: str, table: Mapping[str, Any]) -> dict[str, Any]:
    return {f"{section}.{k}": v for k, v in table.items()}


def _clickable(out: dict[str, Any], where: str) -> None:
    """``clickable_only`` of the uniform agent became the kind ``uniform_clickable``."""
    found, value = saved_pop(out, "clickable_only")
    if found and saved_flag(f"{where}clickable_only", value) and out.get("kind") == "uniform":
        out["kind"] = "uniform_clickable"


def _small(out: dict[str, Any], kind: Any, where: str) -> None:
    """The small agent's architecture became constants but for the options a run still picks;
    they meant something where the run built a new small agent (or a uniform one from it)."""
    small = out.get("small")
    if not isinstance(small, Mapping):
        return
    built = kind in ("small", "uniform", "uniform_clickable") and out.get("path") is None
    arch, features = SmallAgentConfig(), FeatureConfig()
    d_model = small.get("d_model", arch.d_model)
    now: dict[str, Any] = {f"small.{k}": getattr(arch, k) for k in SMALL_FIXED}
    now |= {f"small.features.{k}": getattr(features, k) for k in FEATURES_FIXED}
    now["small.features.elem_words"] = 12 if small.get("page_text") else 0
    now["small.explore_spans"] = False
    now["small.d_ff"] = 2 * d_model if isinstance(d_model, int) else IGNORED
    drop_retired(out, used_only(now, built), where)
    found, seed = saved_pop(out, "small.seed")
    if found and built and kind == "small":  # the weights' seed: ``agent.seed`` now, which a
        out["seed"] = seed  # small agent did not read then
    features_left = saved_pop(out, "small.features")[1]
    if features_left:
        saved_put(out, "small.features", features_left)  # a key no version had: the loader's


def _requests_per_minute(out: dict[str, Any], chat: str) -> None:
    """A rate limit of 0 meant none; none is null now."""
    found, value = saved_pop(out, f"{chat}.requests_per_minute")
    if found:
        saved_put(out, f"{chat}.requests_per_minute", None if value == 0 else value)


def _vlm(out: dict[str, Any], used: bool, where: str) -> None:
    """The VLM agent's options that became constants or load-time choices, and the server's
    nested ``chat`` block that became its own endpoint fields."""
    if not isinstance(out.get("vlm"), Mapping):
        return
    retired = {f"vlm.{k}": IGNORED if v is None else v for k, v in VLM_RETIRED.items()}
    retired |= {f"vlm.lora.{k}": IGNORED for k in RETIRED_LORA}
    retired |= {f"vlm.server.{k}": IGNORED for k in RETIRED_SERVER}
    retired |= {f"vlm.server.chat.{k}": v for k, v in VLM_SERVER_CHAT_FIXED.items()}
    for key in SERVER_CHAT_KEYS:
        saved_move(out, f"vlm.server.chat.{key}", f"vlm.server.{key}")
    drop_retired(out, used_only(retired, used), where)
    found, chat = saved_pop(out, "vlm.server.chat")
    if found and chat:
        saved_put(out, "vlm.server.chat", chat)  # a key no version had: the loader names it
