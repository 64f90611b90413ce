"""The VLM judge's prompt (few-shot turns + the query) and the parser for its reply.

A prompt is a list of chat messages whose image parts still hold raw arrays
(``{"type": "image", "array": ...}``). `prompt_key` hashes it with the images replaced by their
digests (cheap, and independent of the PNG encoder), and `render` turns it into the
OpenAI-compatible request only when the cache missed.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from devicerl.clients.chat import image_part, text_part
from devicerl.judges.base import Label

#: Bump when the prompt layout or the reply format changes: old cache entries stop matching.
PROMPT_VERSION = 1

SYSTEM_PROMPT = """\
You evaluate agents that operate a phone or a web browser. An agent was given a task; you see \
the task, the actions it took so far, and screenshots of the device (oldest first; the last \
one is the screen now). Decide whether the task has been accomplished, using only what the \
screenshots show. A task that asks for information counts as accomplished only when the answer \
is visible on the last screen. Typing the right text without submitting it does not finish a \
search. When unsure, answer FAILURE.
Reply in exactly this format:
Rationale: <one or two sentences about what the last screen shows>
Verdict: SUCCESS or FAILURE"""


@dataclass(frozen=True)
class Example:
    """A few-shot example: a task, its screenshots (oldest first) and the right label."""

    instruction: str
    images: tuple[np.ndarray, ...]
    label: Label
    rationale: str = ""
    actions: tuple[str, ...] = field(default_factory=tuple)


def image_digest(image: np.ndarray) -> str:
    """A content hash of an image array (shape, dtype and pixels)."""
    a = np.ascontiguousarray(image)
    h = hashlib.sha256(f"{a.shape}|{a.dtype}|".encode())
    h.update(a.tobytes())
    return h.hexdigest()


def _user_turn(
    instruction: str,
    actions: Sequence[str],
    images: Sequence[np.ndarray],
    answer: str | None = None,
) -> dict:
    lines = [f"Task: {instruction}"]
    if actions:
        lines.append("Actions taken (oldest first):")
        lines += [f"{i + 1}. {a}" for i, a in enumerate(actions)]
    else:
        lines.append("Actions taken: none")
    if answer is not None:  # only then: the prompts (and cache keys) of other episodes hold
        lines.append(
            f"The agent's answer to the user: {json.dumps(answer, ensure_ascii=False)}. A task "
            "that asks for information is accomplished when this answer is right; judge it "
            "against what the screenshots show."
        )
    lines.append(f"Screenshots ({len(images)}, oldest first, the last is the current screen):")
    parts: list[dict[str, Any]] = [text_part("\n".join(lines))]
    parts += [{"type": "image", "array": img} for img in images]
    return {"role": "user", "content": parts}


def format_answer(label: Label, rationale: str) -> str:
    """The reply format the prompt asks for (used for few-shot answers)."""
    word = "SUCCESS" if label is Label.SUCCESS else "FAILURE"
    return f"Rationale: {rationale or 'See the last screenshot.'}\nVerdict: {word}"


def build_prompt(
    instruction: str,
    actions: Sequence[str],
    images: Sequence[np.ndarray],
    examples: Sequence[Example] = (),
    system_prompt: str = "",
    answer: str | None = None,
) -> list[dict[str, Any]]:
    """System message, one user/assistant pair per few-shot example, then the query (with the
    agent's ``answer`` to the user, when it gave one)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt or SYSTEM_PROMPT}]
    for ex in examples:
        messages.append(_user_turn(ex.instruction, ex.actions, ex.images))
        messages.append({"role": "assistant", "content": format_answer(ex.label, ex.rationale)})
    messages.append(_user_turn(instruction, actions, images, answer))
    return messages


def _map_images(messages: list[dict[str, Any]], fn: Any) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        content = m["content"]
        if isinstance(content, list):
            content = [fn(p["array"]) if p.get("type") == "image" else p for p in content]
        out.append({**m, "content": content})
    return out


def prompt_key(messages: list[dict[str, Any]], **request: Any) -> str:
    """Cache key: a hash of the request parameters (model, ...) and the prompt with images."""
    hashed = _map_images(messages, lambda a: {"type": "image", "sha256": image_digest(a)})
    blob = json.dumps(
        {"v": PROMPT_VERSION, "request": request, "messages": hashed},
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def render(messages: list[dict[str, Any]], image_format: str = "png") -> list[dict[str, Any]]:
    """The chat-completions messages, images encoded as ``data:`` URLs."""
    return _map_images(messages, lambda a: image_part(a, image_format))


# -- reply parsing ---------------------------------------------------------------------------
_WORDS = {
    "success": Label.SUCCESS,
    "successful": Label.SUCCESS,
    "succeeded": Label.SUCCESS,
    "completed": Label.SUCCESS,
    "complete": Label.SUCCESS,
    "accomplished": Label.SUCCESS,
    "yes": Label.SUCCESS,
    "true": Label.SUCCESS,
    "failure": Label.FAILURE,
    "failed": Label.FAILURE,
    "fail": Label.FAILURE,
    "unsuccessful": Label.FAILURE,
    "incomplete": Label.FAILURE,
    "no": Label.FAILURE,
    "false": Label.FAILURE,
}
_KEYS = ("verdict", "status", "label", "answer", "result", "success")
_LINE_RE = re.compile(rf"^[\s*#>_-]*(?:{'|'.join(_KEYS)})[\s*_]*[:=]\s*(.+)$", re.I | re.M)
_RATIONALE_RE = re.compile(r"^[\s*#_-]*(?:rationale|reason(?:ing)?)[\s*_]*:\s*(.+)", re.I | re.M)


_ECHO_RE = re.compile(r"^\W*[a-z]+\W*(?:or|/|\|)\W*[a-z]+\W*$", re.I)


def _word_label(text: str) -> Label | None:
    """The label of the first verdict word in ``text`` (``not completed`` is a failure)."""
    if _ECHO_RE.match(text.strip()):  # "SUCCESS or FAILURE": the format echoed
        return None
    words = re.findall(r"[a-z]+", text.lower())
    for i, w in enumerate(words[:12]):
        label = _WORDS.get(w)
        if label is not None:
            negated = i > 0 and words[i - 1] in ("not", "never")
            return Label.FAILURE if negated else label
    return None


def _json_label(text: str) -> tuple[Label | None, str]:
    m = re.search(r"\{.*\}", text, re.S)
    if not m:
        return None, ""
    try:
        obj = json.loads(m.group(0))
    except json.JSONDecodeError:
        return None, ""
    if not isinstance(obj, dict):
        return None, ""
    rationale = str(obj.get("rationale") or obj.get("reason") or obj.get("reasoning") or "")
    for key in _KEYS:
        v = obj.get(key)
        if isinstance(v, bool):
            return (Label.SUCCESS if v else Label.FAILURE), rationale
        if isinstance(v, str) and (label := _word_label(v)) is not None:
            return label, rationale
    return None, rationale


def parse_verdict(text: str) -> tuple[Label, str, str]:
    """``(label, rationale, reason)`` from a reply; ``UNKNOWN`` with a reason when unreadable.

    Accepts the requested ``Verdict: SUCCESS|FAILURE`` line (also ``Status:``/``Answer:``, with
    markdown emphasis), a JSON object with a ``verdict``/``success`` field, or a reply of one
    word (``Yes.``; but not ``no idea``). The last verdict line wins (models sometimes restate
    the format first).
    """
    text = text or ""
    label, rationale = _json_label(text)
    if label is None:
        found = [_word_label(m.group(1)) for m in _LINE_RE.finditer(text)]
        found = [f for f in found if f is not None]
        label = found[-1] if found else _word_label(text) if len(text.split()) == 1 else None
        m = _RATIONALE_RE.search(text)
        rationale = m.group(1).strip() if m else _LINE_RE.sub("", text).strip()
    if label is None:
        snippet = " ".join(text.split())[:160]
        return Label.UNKNOWN, "", f"unparseable judge reply: {snippet!r}"
    return label, rationale[:1000], ""
