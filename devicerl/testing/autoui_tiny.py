"""Tiny random-initialised AutoUI-style checkpoints, built in code (nothing is downloaded).

`build_tiny_autoui(root)` writes two local directories in the layouts real checkpoints use:
``root/t5`` (config.json, model.safetensors and tokenizer files: a T5 with tiny dimensions and a
character-level tokenizer, or a tiny SentencePiece model in T5's ``spiece.model`` layout) and
``root/vision`` (a tiny ViT with its image-processor config). With ``autoui_layout=True`` the
fusion weights are stored inside the T5 weights under Auto-UI's names, as in the released
Auto-UI-Base checkpoint. For tests, smoke runs and benchmarks of the loading, generation and
training code paths.
"""

from __future__ import annotations

from pathlib import Path

import torch

from devicerl.agents.fusion import ImageFusion

SPECIALS = ("<pad>", "</s>", "<unk>")  # ids 0, 1, 2 as in T5


def char_tokenizer():
    """A character-level `PreTrainedTokenizerFast` (printable ASCII + newline)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = ["\n"] + [chr(c) for c in range(32, 127)]
    vocab = {t: i for i, t in enumerate([*SPECIALS, *chars])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>"
    )


def spm_tokenizer_files(out: Path, vocab_size: int = 120) -> None:
    """Train a tiny SentencePiece unigram model on AutoUI-format text and write it as a T5
    tokenizer (``spiece.model`` + ``tokenizer_config.json``), the files Auto-UI ships."""
    import io
    import json
    import random

    import sentencepiece as spm

    from devicerl.actions import Action, format_autoui

    rng = random.Random(0)
    lines = []
    for _ in range(300):
        action = rng.choice(
            [
                Action.tap(rng.random(), rng.random()),
                Action.type_text(rng.choice(["hello world", "apple", "weather in Paris"])),
                Action.back(),
                Action.home(),
                Action.enter(),
                Action.complete(),
            ]
        )
        lines += [format_autoui(action, precision=4), "Previous Actions: Goal: Tap the box"]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=vocab_size,
        model_type="unigram",
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        character_coverage=1.0,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "spiece.model").write_bytes(model.getvalue())
    config = {"tokenizer_class": "T5Tokenizer", "extra_ids": 0, "model_max_length": 512}
    (out / "tokenizer_config.json").write_text(json.dumps(config))


def build_tiny_autoui(
    root: str | Path,
    d_model: int = 32,
    layers: int = 2,
    heads: int = 4,
    vision_hidden: int = 32,
    image_size: int = 32,
    autoui_layout: bool = False,
    tokenizer: str = "char",
    seed: int = 0,
) -> tuple[Path, Path]:
    """Write a tiny T5 (+ tokenizer) and a tiny ViT under ``root``; returns (t5_dir, vision_dir).

    ``tokenizer``: ``char`` (character level: every text has exactly one spelling) or ``spm``
    (a SentencePiece unigram model in T5's ``spiece.model`` layout: texts can be spelled in
    several ways, as with the real T5 tokenizer).
    """
    from safetensors.torch import load_file, save_file
    from transformers import (
        AutoTokenizer,
        T5Config,
        T5ForConditionalGeneration,
        ViTConfig,
        ViTModel,
    )
    from transformers.models.vit import ViTImageProcessorPil

    root = Path(root)
    t5_dir, vision_dir = root / "t5", root / "vision"
    if tokenizer == "spm":
        spm_tokenizer_files(t5_dir)
        tok = AutoTokenizer.from_pretrained(str(t5_dir))
    elif tokenizer == "char":
        tok = char_tokenizer()
    else:
        raise ValueError(f"tokenizer must be 'char' or 'spm', got {tokenizer!r}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        t5 = T5ForConditionalGeneration(
            T5Config(
                vocab_size=len(tok),
                d_model=d_model,
                d_kv=d_model // heads,
                d_ff=2 * d_model,
                num_layers=layers,
                num_decoder_layers=layers,
                num_heads=heads,
                dropout_rate=0.1,
                pad_token_id=0,
                eos_token_id=1,
                decoder_start_token_id=0,
            )
        )
        vit = ViTModel(
            ViTConfig(
                hidden_size=vision_hidden,
                num_hidden_layers=1,
                num_attention_heads=2,
                intermediate_size=2 * vision_hidden,
                image_size=image_size,
                patch_size=image_size // 4,
            )
        )
        fusion = ImageFusion(vision_hidden, d_model)
    t5.save_pretrained(str(t5_dir))
    if tokenizer == "char":
        tok.save_pretrained(str(t5_dir))
    vit.save_pretrained(str(vision_dir))
    ViTImageProcessorPil(size={"height": image_size, "width": image_size}).save_pretrained(
        str(vision_dir)
    )
    if autoui_layout:  # fusion weights inside the T5 weights, as Auto-UI ships them
        weights = t5_dir / "model.safetensors"
        state = load_file(str(weights))
        state.update({k: v.contiguous() for k, v in fusion.state_dict().items()})
        save_file(state, str(weights), metadata={"format": "pt"})
    return t5_dir, vision_dir
