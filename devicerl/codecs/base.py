"""`ActionCodec`: one model family's action language, as a part with one job.

A codec turns an `Action` into the text a model family writes (`format`) and that text back into
an `Action` (`parse`, which never raises: anything unreadable is an invalid action keeping the
raw text and the reason), and writes the prompt fragment that tells the family its action space:
the system message or tool description it was trained with, the earlier actions as the family
writes its history, and the chat those form (`chat`). Coordinates go through the
`ImageGeometry` of the image the model sees, so a point survives the processor's resize.

Chats are lists of messages in transformers' multimodal layout (``{"role": ..., "content":
[{"type": "image"}, {"type": "text", "text": ...}]}``); `fold_system` moves the system text into
the first user turn for a chat template without a system role, `openai_messages` turns a chat
into an OpenAI-compatible request's messages.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from devicerl.actions import Action, Point
from devicerl.codecs.geometry import ImageGeometry, KeepSize, Resize
from devicerl.records import Observation

#: Texts of earlier actions longer than this are cut in prompts (junk from invalid actions).
MAX_PREVIOUS_CHARS = 200


@dataclass(frozen=True)
class PromptStep:
    """What one step's chat is built from: the instruction, the geometry of the image the model
    sees, the earlier actions the prompt shows (oldest first), the UI element list as text
    ("": none) and whether the screenshot is shown."""

    instruction: str
    geometry: ImageGeometry
    previous: tuple[Action, ...] = ()
    elements: str = ""
    image: bool = True


def seconds(value: Any, default: float) -> float:
    """A duration a model wrote (a number or a numeric string; missing or empty: ``default``);
    `ValueError` for anything else."""
    if value is None or value == "":
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"duration {value!r} is not a number of seconds")
    return float(value)


def seconds_text(value: float) -> str:
    """A duration as short as it reads back exactly (``2``, ``1.5``)."""
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


def message(role: str, text: str | None = None, image: bool = False, image_first: bool = True):
    """One chat message: optional image part and text part, in the order given."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text is not None else []
    if image:
        parts.insert(0 if image_first else len(parts), {"type": "image"})
    return {"role": role, "content": parts}


class ActionCodec(ABC):
    """Text <-> `Action` and the prompt fragment of one model family (see the module doc).

    ``special_tokens``: strings its texts hold that the family's tokenizer keeps as single
    tokens (teacher forcing spells them so); ``served``: the resize a server of the family
    applies to a screenshot sent as is; ``image_first``: the screenshot comes before the user
    text (after it otherwise)."""

    name: ClassVar[str] = ""
    special_tokens: ClassVar[tuple[str, ...]] = ()
    served: ClassVar[Resize] = KeepSize()
    image_first: ClassVar[bool] = True

    # -- action text ------------------------------------------------------------------------------
    def format(self, action: Action, geometry: ImageGeometry) -> str:
        """The text the family writes for ``action``; an invalid action's own raw text."""
        return action.raw if action.is_invalid else self.write(action, geometry)

    def parse(self, text: str, geometry: ImageGeometry) -> Action:
        """The action ``text`` describes. Never raises: anything else is an invalid action with
        the text and the reason."""
        if not isinstance(text, str):
            return Action.invalid(repr(text), "model output is not a string")
        if not text.strip():
            return Action.invalid(text, "empty output")
        try:
            return self.read(text, geometry)
        except ValueError as e:  # the text names an action devicerl refuses (a 0 s wait)
            return Action.invalid(text, str(e)[:300])
        except Exception as e:  # model output must never crash a run
            return Action.invalid(text, f"parser error: {type(e).__name__}: {e}"[:300])

    @abstractmethod
    def write(self, action: Action, geometry: ImageGeometry) -> str:
        """The text of a valid action."""

    @abstractmethod
    def read(self, text: str, geometry: ImageGeometry) -> Action:
        """The action in a non-empty text, or an invalid one (may raise: `parse` catches)."""

    def write_point(self, point: Point, geometry: ImageGeometry) -> str:
        """A point as the family writes coordinates (in element lists)."""
        return f"[{point[0]:.3f}, {point[1]:.3f}]"

    def served_geometry(self, obs: Observation) -> ImageGeometry:
        """The image a server of this family sees when sent ``obs``'s screenshot as is (the
        screen's size when there is none), resized as `served` says."""
        shot = obs.screenshot
        width, height = (shot.shape[1], shot.shape[0]) if shot is not None else obs.screen_size
        return self.served(int(width), int(height))

    # -- prompt -----------------------------------------------------------------------------------
    @abstractmethod
    def system(self, geometry: ImageGeometry) -> str:
        """The system message: the action space as the family was trained to read it."""

    @abstractmethod
    def user_text(self, step: PromptStep) -> str:
        """The user message's text for one step (instruction, history, elements)."""

    def previous_text(self, action: Action, geometry: ImageGeometry) -> str:
        """One earlier action as the history shows it (long junk cut)."""
        return self.format(action, geometry)[:MAX_PREVIOUS_CHARS]

    def chat(self, step: PromptStep, system: str) -> list[dict[str, Any]]:
        """The step's chat: ``system`` (the codec's own or custom instructions), then the user
        turn with the screenshot and `user_text`."""
        user = message("user", self.user_text(step), step.image, self.image_first)
        return [message("system", system), user]

    def elements_text(self, obs: Observation, geometry: ImageGeometry, limit: int) -> str:
        """One line per UI element (at most ``limit``): role, text, value, flags and centre."""
        out = []
        for el in obs.elements[:limit]:
            point = self.write_point(obs.to_normalised(*el.center), geometry)
            flags = [n for n, on in (("editable", el.editable), ("focused", el.focused)) if on]
            value = f" value={el.value!r}" if el.value else ""
            extra = f" ({', '.join(flags)})" if flags else ""
            out.append(f"- {el.role} {el.text!r}{value} at {point}{extra}")
        if len(obs.elements) > limit:
            out.append(f"- ... {len(obs.elements) - limit} more elements")
        return "\n".join(out)


def fold_system(chat: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``chat`` for a template without a system role: the system text opens the first user
    turn's text (``system + "\\n\\n" + text``)."""
    system = "\n\n".join(
        p["text"] for m in chat if m["role"] == "system" for p in m["content"] if "text" in p
    )
    out = [dict(m, content=list(m["content"])) for m in chat if m["role"] != "system"]
    if not system:
        return out
    for m in out:
        if m["role"] != "user":
            continue
        for i, part in enumerate(m["content"]):
            if part["type"] == "text":
                m["content"][i] = {"type": "text", "text": f"{system}\n\n{part['text']}"}
                return out
        m["content"].append({"type": "text", "text": system})
        return out
    return [message("user", system), *out]


def openai_messages(chat: Sequence[dict[str, Any]], image: dict[str, Any] | None):
    """``chat`` as an OpenAI-compatible request's messages: system and assistant turns as
    plain strings, user turns as content parts with ``image`` (an ``image_url`` part) where the
    screenshot goes."""
    out = []
    for m in chat:
        texts = [p["text"] for p in m["content"] if p["type"] == "text"]
        if m["role"] != "user":
            out.append({"role": m["role"], "content": "\n".join(texts)})
            continue
        parts = []
        for p in m["content"]:
            if p["type"] == "image":
                if image is not None:
                    parts.append(image)
            else:
                parts.append({"type": "text", "text": p["text"]})
        out.append({"role": "user", "content": parts})
    return out
