"""What the vision-language agent feeds its model, and what it scores: `VLMInputs`.

For each observation: the screenshot (resized to ``image_size`` if set), the `ImageGeometry` the
processor will make of it (`devicerl.agents.vlm.geometry`), the chat the codec writes for that
geometry (`devicerl.agents.vlm.prompt`), and the processor's left-padded inputs for a batch.
For scoring: the text teacher forcing scores for a stored action (`targets`) and its canonical
tokens (`target_ids`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import torch

from devicerl.actions import Action
from devicerl.agents.vlm.geometry import processor_geometry
from devicerl.agents.vlm.prompt import MAX_ELEMENTS
from devicerl.codecs import ActionCodec, ImageGeometry, PromptStep, fold_system
from devicerl.records import Observation


class VLMInputs:
    """Prompts, images, geometry and token targets of `VLMAgent` (a mixin: it reads the agent's
    ``config``, ``processor``, ``tokenizer``, ``codec``, ``special_ids``, ``system_prompt``,
    ``system_role``, ``device``, ``dtype`` and ``eos_ids``)."""

    config: Any
    processor: Any
    tokenizer: Any
    codec: ActionCodec
    special_ids: dict[str, int]
    system_prompt: str | None
    system_role: bool
    device: torch.device
    dtype: torch.dtype
    eos_ids: list[int]

    # -- images and geometry --------------------------------------------------------------------
    def image(self, obs: Observation) -> Any:
        """The screenshot as a PIL image (resized to ``image_size``), or None."""
        if obs.screenshot is None:
            return None
        from PIL import Image

        img = Image.fromarray(obs.screenshot)
        size = self.config.image_size
        return img.resize(size, Image.Resampling.BICUBIC) if size and img.size != size else img

    def geometry(self, obs: Observation, image: Any = None) -> ImageGeometry:
        """The geometry of the image the model sees for ``obs`` (``image``: its screenshot as
        `image` returns it; without one, the screen's size)."""
        size = image.size if image is not None else obs.screen_size
        return processor_geometry(self.processor.image_processor, *size)

    # -- chats ----------------------------------------------------------------------------------
    def instructions(self, geometry: ImageGeometry) -> str:
        """The system message: the agent's own instructions, else the codec's."""
        return self.system_prompt or self.codec.system(geometry)

    def messages(
        self, obs: Observation, has_image: bool, geometry: ImageGeometry | None = None
    ) -> list[dict[str, Any]]:
        """The chat for one observation (``{"type": "image"}`` marks the screenshot)."""
        cfg = self.config
        geometry = geometry or self.geometry(obs, self.image(obs) if has_image else None)
        previous = tuple(obs.previous_actions)[-cfg.history :] if cfg.history > 0 else ()
        elements = ""
        if cfg.include_elements and obs.elements:
            elements = self.codec.elements_text(obs, geometry, MAX_ELEMENTS)
        step = PromptStep(obs.instruction, geometry, previous, elements, has_image)
        chat = self.codec.chat(step, self.instructions(geometry))
        return chat if self.system_role else fold_system(chat)

    def encode_chats(
        self, chats: Sequence[list[dict[str, Any]]], images: Sequence[Any]
    ) -> dict[str, torch.Tensor]:
        """Processor inputs (left-padded, on the device) for chats and their images."""
        prompts = [
            self.processor.apply_chat_template(c, add_generation_prompt=True, tokenize=False)
            for c in chats
        ]
        kwargs: dict[str, Any] = {"text": prompts, "padding": True, "return_tensors": "pt"}
        if any(im is not None for im in images):
            kwargs["images"] = [[im] if im is not None else [] for im in images]
        batch = self.processor(**kwargs)
        return {
            k: v.to(self.device, self.dtype if v.is_floating_point() else None)
            for k, v in batch.items()
            if isinstance(v, torch.Tensor)
        }

    def encode(self, observations: Sequence[Observation]) -> dict[str, torch.Tensor]:
        """Processor inputs for a batch."""
        return self.prepare(observations)[0]

    def prepare(
        self, observations: Sequence[Observation]
    ) -> tuple[dict[str, torch.Tensor], list[ImageGeometry]]:
        """Processor inputs for a batch and each row's geometry."""
        images = [self.image(o) for o in observations]
        geometries = [self.geometry(o, im) for o, im in zip(observations, images)]
        rows = zip(observations, images, geometries)
        chats = [self.messages(o, im is not None, g) for o, im, g in rows]
        return self.encode_chats(chats, images), geometries

    # -- scoring targets ------------------------------------------------------------------------
    def targets(
        self,
        actions: Sequence[Action],
        texts: Sequence[str | None],
        geometries: Sequence[ImageGeometry],
    ) -> list[str]:
        """The text teacher forcing scores for each stored action: the text the policy generated
        when the step has one this codec reads as that very action, else the action written by
        this codec (a step from another codec, an imported or scripted one)."""
        out = []
        for action, text, g in zip(actions, texts, geometries):
            own = text is not None and self.codec.parse(text, g) == action
            out.append(text if own else self.codec.format(action, g))  # type: ignore[arg-type]
        return out

    def target_ids(self, text: str) -> list[int]:
        """The canonical tokens teacher forcing scores for ``text`` (end-of-sequence last).
        Special-token strings are spelled as plain text, except the codec's own
        (``special_tokens``, e.g. UI-TARS' ``<|box_start|>``) where the tokenizer has them as
        single tokens (`special_ids`): the model writes those as one token."""
        ids: list[int] = []
        pieces = [text]
        if self.special_ids:
            pattern = "(" + "|".join(re.escape(s) for s in self.special_ids) + ")"
            pieces = re.split(pattern, text)
        for piece in pieces:
            if piece in self.special_ids:
                ids.append(self.special_ids[piece])
            elif piece:
                tok = self.tokenizer(piece, add_special_tokens=False, split_special_tokens=True)
                ids += tok.input_ids
        return [*ids, self.eos_ids[0]]


def special_ids(tokenizer: Any, codec: ActionCodec) -> dict[str, int]:
    """The codec's special strings that ``tokenizer`` holds as one token each, with their
    ids."""
    found = {}
    for s in codec.special_tokens:
        tid = tokenizer.convert_tokens_to_ids(s)
        single = isinstance(tid, int) and tid != tokenizer.unk_token_id
        if single and tokenizer.convert_ids_to_tokens(tid) == s:
            found[s] = tid
    return found
