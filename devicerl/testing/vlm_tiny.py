"""Tiny random vision-language models of real families, built in code (nothing is downloaded).

`build_tiny_vlm(folder, family)` writes a local model folder in the layout the hub's
checkpoints have (``config.json``, ``model.safetensors``, tokenizer files, the image
processor's config, ``chat_template.jinja``, ``processor_config.json``), loadable with
``AutoModelForImageTextToText`` + ``AutoProcessor`` and so with `VLMAgent.from_pretrained`.
The architecture is the family's own (Qwen2-VL's multimodal rotary positions, Qwen3-VL's
deepstack features, Idefics3's pixel shuffle, Gemma 3's pooled image tokens) at tiny sizes
(hidden 64, 2 layers, a 1-layer vision tower, 56 x 56 images); the tokenizer is a byte-level BPE
trained on the agents' prompts and action texts in every codec's language, with the family's
special tokens; the chat template is a short one in the family's format. For tests, smoke runs
and benchmarks.

`qwen2_5_vl_3b()` builds Qwen2.5-VL-3B-Instruct's architecture at its real sizes (random
weights) in memory, for memory and speed measurements on a GPU.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "idefics3", "gemma3")

#: Image side (pixels) the tiny processors resize screenshots to.
IMAGE_SIDE = 56

#: Qwen's special tokens (the box tokens UI-TARS writes points in; the tool-call tags of
#: ``mobile_use``, added tokens in Qwen2.5-VL's vocabulary).
_QWEN_SPECIALS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
    "<|image_pad|>", "<|video_pad|>", "<|box_start|>", "<|box_end|>", "<tool_call>",
    "</tool_call>",
]  # fmt: skip
_QWEN_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}"
    "<|vision_start|><|image_pad|><|vision_end|>{% elif part['type'] == 'text' %}"
    "{{ part['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_IDEFICS3_SPECIALS = [
    "<|endoftext|>", "<|im_start|>", "<end_of_utterance>", "<fake_token_around_image>",
    "<image>", "<global-img>",
]  # fmt: skip
_IDEFICS3_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{ message['role'] | capitalize }}"
    "{% if message['content'][0]['type'] == 'image' %}{{ ':' }}{% else %}{{ ': ' }}{% endif %}"
    "{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% elif part['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}"
    "<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)
_GEMMA3_SPECIALS = [
    "<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>",
    "<end_of_image>", "<image_soft_token>",
]  # fmt: skip
_GEMMA3_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "<start_of_turn>{{ role }}\n{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<start_of_image>{% elif part['type'] == 'text' %}"
    "{{ part['text'] }}{% endif %}{% endfor %}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def _corpus(seed: int = 0) -> list[str]:
    """Prompts and action texts like the agents', in every codec's language (`devicerl.codecs`),
    at the tiny processors' image sizes and a phone's."""
    from devicerl.actions import Action
    from devicerl.codecs import CODECS, ImageGeometry, PromptStep

    geometries = [ImageGeometry((56, 56)), ImageGeometry((28, 56)), ImageGeometry((1092, 2408))]
    rng = random.Random(seed)
    words = ["apple", "river", "stone", "cloud", "submit", "OK", "search", "name", "password"]
    out = []
    for cls in CODECS.values():
        codec = cls()
        out += [codec.system(g) for g in geometries]
        for _ in range(150):
            w = rng.choice(words)
            action = rng.choice(
                [
                    Action.tap(round(rng.random(), 3), round(rng.random(), 3)),
                    Action.swipe(0.5, 0.8, 0.5, 0.2),
                    Action.type_text(w),
                    Action.back(),
                    Action.enter(),
                    Action.complete(),
                ]
            )
            g = rng.choice(geometries)
            out.append(codec.format(action, g))
            step = PromptStep(f"Tap the box labelled {w}", g, (action,))
            out.append(codec.user_text(step))
            out.append(f'Instruction: Enter "{w}" into the text field and press Submit.')
    return out


def bpe_tokenizer(specials: list[str], vocab_size: int = 1024, **named: str) -> Any:
    """A byte-level BPE `PreTrainedTokenizerFast` trained on `_corpus`; ``specials`` get the
    first ids; ``named`` maps attribute names (eos_token, pad_token, ...) to special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, **named)


def _text(vocab: int, **kw: Any) -> dict[str, Any]:
    base = dict(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
    )
    return {**base, **kw}


def _qwen(family: str) -> tuple[Any, Any, Any]:
    """(tokenizer, image processor, model config) of a tiny Qwen2-VL / 2.5-VL / 3-VL."""
    import transformers as tf
    from transformers.models.qwen2_vl import Qwen2VLImageProcessorPil

    tok = bpe_tokenizer(_QWEN_SPECIALS, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    ids = {t: tok.convert_tokens_to_ids(t) for t in _QWEN_SPECIALS}
    special = dict(
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    )
    tokens = dict(
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    # head dim 16: the three multimodal rope sections (time, height, width) share its 8 pairs
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}
    patch = 16 if family == "qwen3_vl" else 14
    pixels = (IMAGE_SIDE // (2 * patch)) ** 2 * (2 * patch) ** 2
    image = Qwen2VLImageProcessorPil(
        min_pixels=pixels, max_pixels=pixels, patch_size=patch, merge_size=2
    )
    if family == "qwen2_vl":
        vision = dict(depth=1, embed_dim=32, hidden_size=64, num_heads=2, mlp_ratio=2)
        config = tf.Qwen2VLConfig(
            text_config=_text(len(tok), rope_parameters=rope, **special),
            vision_config=vision,
            **tokens,
        )
    elif family == "qwen2_5_vl":
        vision = dict(
            depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
            window_size=56, fullatt_block_indexes=[1],
        )  # fmt: skip
        config = tf.Qwen2_5_VLConfig(
            text_config=_text(len(tok), rope_parameters=rope, **special),
            vision_config=vision,
            **tokens,
        )
    else:
        rope = {**rope, "mrope_interleaved": True}
        vision = dict(
            depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
            patch_size=patch, num_position_embeddings=16, deepstack_visual_indexes=[0],
        )  # fmt: skip
        config = tf.Qwen3VLConfig(
            text_config=_text(len(tok), head_dim=16, rope_parameters=rope, **special),
            vision_config=vision,
            **tokens,
        )
    return tok, image, config


def _idefics3() -> tuple[Any, Any, Any]:
    import transformers as tf
    from transformers.models.idefics3 import Idefics3ImageProcessorPil

    tok = bpe_tokenizer(
        _IDEFICS3_SPECIALS, eos_token="<end_of_utterance>", pad_token="<|endoftext|>"
    )
    ids = {t: tok.convert_tokens_to_ids(t) for t in _IDEFICS3_SPECIALS}
    image = Idefics3ImageProcessorPil(
        do_image_splitting=False,
        size={"longest_edge": IMAGE_SIDE},
        max_image_size={"longest_edge": IMAGE_SIDE},
    )
    config = tf.Idefics3Config(
        vision_config=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=IMAGE_SIDE,
            patch_size=14,
        ),
        text_config=dict(
            model_type="llama",
            **_text(len(tok)),
            bos_token_id=ids["<|im_start|>"],
            eos_token_id=ids["<end_of_utterance>"],
            pad_token_id=ids["<|endoftext|>"],
        ),
        image_token_id=ids["<image>"],
        scale_factor=2,
        pad_token_id=ids["<|endoftext|>"],
    )
    return tok, image, config


def _gemma3() -> tuple[Any, Any, Any]:
    import transformers as tf
    from transformers.models.gemma3 import Gemma3ImageProcessorPil

    tok = bpe_tokenizer(
        _GEMMA3_SPECIALS,
        pad_token="<pad>",
        eos_token="<end_of_turn>",
        bos_token="<bos>",
        unk_token="<unk>",
        extra_special_tokens={
            "boi_token": "<start_of_image>",
            "eoi_token": "<end_of_image>",
            "image_token": "<image_soft_token>",
        },
    )
    ids = {t: tok.convert_tokens_to_ids(t) for t in _GEMMA3_SPECIALS}
    image = Gemma3ImageProcessorPil(size={"height": IMAGE_SIDE, "width": IMAGE_SIDE})
    config = tf.Gemma3Config(
        text_config=_text(
            len(tok),
            head_dim=16,
            query_pre_attn_scalar=16,
            sliding_window=64,
            pad_token_id=ids["<pad>"],
            eos_token_id=ids["<end_of_turn>"],
            bos_token_id=ids["<bos>"],
        ),
        vision_config=dict(
            model_type="siglip_vision_model",
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=IMAGE_SIDE,
            patch_size=14,
        ),
        mm_tokens_per_image=4,
        boi_token_index=ids["<start_of_image>"],
        eoi_token_index=ids["<end_of_image>"],
        image_token_index=ids["<image_soft_token>"],
    )
    return tok, image, config


def build_tiny_vlm(folder: str | Path, family: str = "qwen2_vl", seed: int = 0) -> Path:
    """Write a tiny random ``family`` model with its processor to ``folder``; returns it."""
    import torch
    from transformers import AutoModelForImageTextToText

    folder = Path(folder)
    if family in ("qwen2_vl", "qwen2_5_vl", "qwen3_vl"):
        tok, image, config = _qwen(family)
        template, processor = (
            _QWEN_TEMPLATE,
            {
                "qwen2_vl": "Qwen2VLProcessor",
                "qwen2_5_vl": "Qwen2_5_VLProcessor",
                "qwen3_vl": "Qwen3VLProcessor",
            }[family],
        )
        extra: dict[str, Any] = {}
    elif family == "idefics3":
        tok, image, config = _idefics3()
        template, processor = _IDEFICS3_TEMPLATE, "Idefics3Processor"
        extra = {"image_seq_len": (IMAGE_SIDE // 14) ** 2 // 4}
    elif family == "gemma3":
        tok, image, config = _gemma3()
        template, processor = _GEMMA3_TEMPLATE, "Gemma3Processor"
        extra = {"image_seq_length": 4}
    else:
        raise ValueError(f"family {family!r}: expected one of {', '.join(FAMILIES)}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForImageTextToText.from_config(config)
    model.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    image.save_pretrained(str(folder))
    (folder / "chat_template.jinja").write_text(template)
    config_file = {"processor_class": processor, **extra}
    (folder / "processor_config.json").write_text(json.dumps(config_file, indent=2) + "\n")
    return folder


def qwen2_5_vl_3b(device: str = "cuda", dtype: Any = None) -> tuple[Any, Any]:
    """(model, processor): Qwen2.5-VL-3B-Instruct's architecture at its real sizes (the sizes
    of its published config.json) with random weights, built on ``device``, and a processor with
    its image settings (14-pixel patches merged 2 x 2, up to 12.8 M pixels) around the tiny
    tokenizer. For memory and speed measurements; nothing is downloaded."""
    import torch
    from transformers import AutoModelForImageTextToText, Qwen2_5_VLConfig, Qwen2_5_VLProcessor
    from transformers.models.qwen2_vl import Qwen2VLImageProcessorPil

    from devicerl.agents.vlm.load import image_only

    tok, _, tiny = _qwen("qwen2_5_vl")
    text = tiny.text_config
    config = Qwen2_5_VLConfig(
        text_config=dict(
            vocab_size=151936,
            hidden_size=2048,
            intermediate_size=11008,
            num_hidden_layers=36,
            num_attention_heads=16,
            num_key_value_heads=2,
            max_position_embeddings=128000,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 1000000.0,
                "mrope_section": [16, 24, 24],
            },
            tie_word_embeddings=True,
            bos_token_id=text.bos_token_id,
            eos_token_id=text.eos_token_id,
            pad_token_id=text.pad_token_id,
        ),
        vision_config=dict(
            depth=32,
            hidden_size=1280,
            intermediate_size=3420,
            num_heads=16,
            out_hidden_size=2048,
            window_size=112,
            fullatt_block_indexes=[7, 15, 23, 31],
            tokens_per_second=2,
        ),
        image_token_id=tiny.image_token_id,
        video_token_id=tiny.video_token_id,
        vision_start_token_id=tiny.vision_start_token_id,
        vision_end_token_id=tiny.vision_end_token_id,
        tie_word_embeddings=True,
    )
    with torch.device(device):
        model = AutoModelForImageTextToText.from_config(config, dtype=dtype or torch.bfloat16)
    image = Qwen2VLImageProcessorPil(
        min_pixels=3136, max_pixels=12845056, patch_size=14, merge_size=2
    )
    processor = image_only(Qwen2_5_VLProcessor)(image, tok, chat_template=_QWEN_TEMPLATE)
    return model, processor
