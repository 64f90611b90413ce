"""The vision-language agent's prompt and action text, written once for local and served models.

A step's prompt is two chat messages: a system message (the action space, generated from
`devicerl.agents.prompt.ACTION_DOCS` with examples written by `format_action`, so the prompt and
the parser cannot drift apart) and a user message holding the screenshot and the text
``Instruction: ...`` / ``Previous actions: ...`` (the last ``history`` of
``Observation.previous_actions``, written as action texts) / optionally ``UI elements: ...``
(at most `MAX_ELEMENTS`) / ``Next action:``. The model's chat template turns them into tokens,
so any family's own format (Qwen's ``<|im_start|>``, Idefics3's ``User:``, Gemma's
``<start_of_turn>``) is respected.

Chat templates without a system role (one that raises on a system message or drops it) get
the instructions at the top of the user message instead: `template_keeps_system` tries the
processor's template once.

The model writes one action as JSON, one object as `Action.to_dict` writes it with coordinates
rounded to `PRECISION` decimals, points as ``[x, y]`` and a tap's lift point left out
(``{"type": "DUAL_POINT", "touch": [0.25, 0.5]}``). Parsing never raises: text without a
readable action becomes an invalid action carrying the text and the reason.
"""

from __future__ import annotations

import json
from typing import Any

from devicerl.actions import Action, ActionType
from devicerl.agents.prompt import ACTION_DOCS
from devicerl.errors import DataError
from devicerl.records import Observation

#: Texts of earlier actions longer than this are cut (junk from invalid actions stays short).
MAX_PREVIOUS_CHARS = 200
#: Decimals of coordinates in prompts and action texts (a thousandth of the screen: finer than a
#: tap needs, short in tokens).
PRECISION = 3
#: Longest UI element list in a prompt (with ``include_elements``).
MAX_ELEMENTS = 30

#: What the instructions say of the two action types whose JSON fields differ from the fields
#: `ACTION_DOCS` describes (AutoUI's text: touch_point, typed_text, points as [y, x]).
_JSON_SUMMARIES = {
    ActionType.DUAL_POINT: (
        "Touch the screen at touch and lift at lift. A tap gives touch only; a swipe gives both "
        "(the finger moves from touch to lift). Points are [x, y], normalised to [0, 1] from the "
        "top-left corner."
    ),
    ActionType.TYPE: "Type text into the focused input (tap the input first).",
}


# -- action text ----------------------------------------------------------------------------------
def format_action(action: Action) -> str:
    """An action as the JSON the model writes: `Action.to_dict` with rounded coordinates and no
    lift point for a tap. An invalid action is written back as its raw text."""
    if action.type is ActionType.INVALID:
        return action.raw
    d: dict[str, Any] = {"type": action.type.value}
    if action.touch is not None:
        d["touch"] = [round(v, PRECISION) for v in action.touch]
        lift = [round(v, PRECISION) for v in action.lift or action.touch]
        if lift != d["touch"]:
            d["lift"] = lift
    if action.type is ActionType.TYPE:
        d["text"] = action.text
    return json.dumps(d, ensure_ascii=False)


def parse_action(text: str) -> Action:
    """The first JSON object in ``text`` read as an action (`Action.from_dict`). Never raises:
    anything else becomes an invalid action with the text and the reason."""
    if not isinstance(text, str):
        return Action.invalid(repr(text), "model output is not a string")
    decoder = json.JSONDecoder()
    start = text.find("{")
    reason = "no JSON object found"
    while start >= 0:
        try:
            obj, _ = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):
            start = text.find("{", start + 1)
            continue
        if not isinstance(obj, dict) or obj.get("type") == ActionType.INVALID.value:
            reason = "the JSON object is not an action"
            break
        try:
            return Action.from_dict(obj)
        except DataError as e:
            return Action.invalid(text, str(e)[:300])
        except Exception as e:  # defensive: model output must never crash a run
            return Action.invalid(text, f"parser error: {type(e).__name__}: {e}")
    return Action.invalid(text, reason)


# -- prompt ---------------------------------------------------------------------------------------
def system_text() -> str:
    """The instructions: the task, the action space with examples written by `format_action`,
    the format."""
    lines = [
        "You operate a device (a phone or a web page) to carry out the user's instruction. You "
        "see a screenshot of the current screen. Choose the single next action.",
        "Actions (reply with exactly one, in this format):",
    ]
    for doc in ACTION_DOCS:
        summary = _JSON_SUMMARIES.get(doc.type, doc.summary)
        lines.append(f"- {doc.type.value}: {summary}")
        lines += [f"  Example: {format_action(a)}" for a in doc.examples]
    lines.append("Reply with the JSON object only.")
    return "\n".join(lines)


def elements_lines(obs: Observation, limit: int = MAX_ELEMENTS) -> str:
    """One line per UI element: role, text, value, flags and centre (``[x, y]``)."""
    out = []
    for el in obs.elements[:limit]:
        point = obs.to_normalised(*el.center)
        flags = [n for n, on in (("editable", el.editable), ("focused", el.focused)) if on]
        value = f" value={el.value!r}" if el.value else ""
        out.append(
            f"- {el.role} {el.text!r}{value} at [{point[0]:.{PRECISION}f}, "
            f"{point[1]:.{PRECISION}f}]" + (f" ({', '.join(flags)})" if flags else "")
        )
    if len(obs.elements) > limit:
        out.append(f"- ... {len(obs.elements) - limit} more elements")
    return "\n".join(out)


def user_text(obs: Observation, history: int = 4, include_elements: bool = False) -> str:
    """The per-step text: instruction, previous actions, optionally the elements."""
    prev = list(obs.previous_actions)[-history:] if history > 0 else []
    texts = [format_action(a)[:MAX_PREVIOUS_CHARS] for a in prev]
    parts = [f"Instruction: {obs.instruction}"]
    parts.append("Previous actions:" + ("".join(f"\n{t}" for t in texts) if texts else " none"))
    if include_elements and obs.elements:
        parts.append("UI elements:\n" + elements_lines(obs))
    parts.append("Next action:")
    return "\n".join(parts)


def chat_messages(
    system: str, text: str, has_image: bool, system_role: bool = True
) -> list[dict[str, Any]]:
    """The chat for one step in the transformers multimodal message layout (content parts;
    ``{"type": "image"}`` marks where the screenshot goes)."""
    user: list[dict[str, Any]] = [{"type": "image"}] if has_image else []
    if system_role:
        user.append({"type": "text", "text": text})
        return [
            {"role": "system", "content": [{"type": "text", "text": system}]},
            {"role": "user", "content": user},
        ]
    user.append({"type": "text", "text": f"{system}\n\n{text}"})
    return [{"role": "user", "content": user}]


#: Stands for the instructions when a chat template is tried (`template_keeps_system`).
_PROBE = "devicerl-system-probe-7f3a"


def template_keeps_system(processor: Any) -> bool:
    """True when the processor's chat template renders a system message's text (as such or
    folded into the first user turn, as Gemma 3's does). A template that raises on a system
    message ("System role not supported"), leaves its text out, or prints its content parts
    raw (a template that expects a plain string) is one without a system role: the agent then
    puts the instructions at the top of the user message."""
    chat = chat_messages(_PROBE, "Next action:", has_image=False)
    try:
        out = processor.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    except Exception:  # jinja's TemplateError, transformers' ValueError: no system role
        return False
    if isinstance(out, list):  # some processors return one prompt per chat
        out = out[0] if out else ""
    return isinstance(out, str) and _PROBE in out and f"'text': '{_PROBE}'" not in out
