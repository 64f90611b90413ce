"""The AutoUI-style agent: T5 encoder-decoder + a frozen vision encoder fused into the encoder.

Input text: ``Previous Actions: <last actions> Goal: <instruction>`` (previous actions come from
``Observation.previous_actions`` when the collector
provides them). Output: AutoUI's action text (`format_autoui` / `parse_autoui`); a reply that
does not parse becomes an invalid action carrying the text and the reason, never an exception.

Generation is our own loop over the decoder with the KV cache (``use_cache=True``), sampling from
``softmax(logits / temperature)`` (or arg-max with ``greedy``); the log-prob of an action is the
sum over its generated tokens (end-of-sequence included). `log_prob` recomputes it with teacher
forcing at the same temperature, on the recorded texts (``texts``, i.e. `Step.text`) or, without
them, on ``format_autoui(action, precision=4)``. Teacher forcing sees the text's canonical
tokens; when the sampled tokens differ from them (a model can spell a text in non-canonical
pieces, or stop at ``max_new_tokens`` without end-of-sequence), the sample's reported log-prob is
the canonical one (``extras["rescored"]`` says why), so trainers and collectors always agree.
``log_prob`` uses the module's current mode: call `eval()` (the default) for exact agreement,
since T5's dropout is active in train mode.

Loading: ``AutoUIAgent.from_pretrained(model_dir, vision_dir)`` takes an Auto-UI-Base style
directory (config.json, weights, tokenizer files; fusion weights inside the T5 weights as in the
released checkpoint, or in ``fusion.safetensors``) and a local vision-encoder directory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from devicerl.actions import Action, format_autoui, parse_autoui
from devicerl.agents.base import ActionSample, check_batch
from devicerl.agents.config import (
    AUTOUI_FUSION_HEADS,
    AUTOUI_MAX_INPUT_TOKENS,
    AUTOUI_PRECISION,
    AutoUIOptions,
    LoRASettings,
)
from devicerl.agents.config import AutoUIConfig as AutoUIConfig  # re-export
from devicerl.agents.fusion import (
    FUSION_FILE,
    ImageFusion,
    fusion_state_from_checkpoint,
    load_fusion,
    save_fusion,
)
from devicerl.agents.torch_policy import TorchPolicy, read_json, resolve_device, write_json
from devicerl.agents.vision import VisionEncoder
from devicerl.errors import ConfigError, DataError
from devicerl.records import Observation

log = logging.getLogger(__name__)
AGENT_FILE, LORA_DIR = "autoui_agent.json", "lora"
MAX_PREVIOUS_CHARS = 300


def input_text(obs: Observation, history: int, precision: int) -> str:
    """AutoUI's input: ``Previous Actions: ... Goal: <instruction>``."""
    prev = list(obs.previous_actions)[-history:] if history > 0 else []
    parts = [format_autoui(a, precision=precision) for a in prev]
    parts = [p[:MAX_PREVIOUS_CHARS] for p in parts]  # junk from invalid actions stays short
    return f"Previous Actions: {' '.join(parts)} Goal: {obs.instruction}"


class AutoUIAgent(TorchPolicy):
    """T5 + image fusion agent (see the module doc)."""

    @property
    def uses_history(self) -> bool:  # type: ignore[override]
        return self.config.history > 0

    def __init__(
        self,
        t5: nn.Module,
        tokenizer: Any,
        vision: VisionEncoder,
        fusion: ImageFusion | None = None,
        config: AutoUIConfig | None = None,
        device: str | torch.device = "cpu",
        vision_dir: str | Path | None = None,
        seed: int = 0,
    ) -> None:
        """``seed``: of sampling, and of new fusion weights."""
        self.config = cfg = config or AutoUIConfig()
        self.seed = seed
        self.temperature = cfg.temperature
        self.tokenizer = tokenizer
        tokenizer.truncation_side = "left"  # a long history loses its oldest part, not the goal
        self.vision = vision
        self.vision_dir = str(Path(vision_dir).resolve()) if vision_dir is not None else None
        d_model = int(t5.config.d_model)
        if fusion is None:
            if not vision.dim:
                raise ConfigError("vision encoder has no hidden_size; pass fusion weights")
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(self.seed)
                fusion = ImageFusion(vision.dim, d_model, AUTOUI_FUSION_HEADS)
        if fusion.d_model != d_model or (vision.dim and fusion.img_dim != vision.dim):
            raise ConfigError(
                f"fusion expects image dim {fusion.img_dim} -> d_model {fusion.d_model}, but the "
                f"vision encoder gives {vision.dim} and T5 has d_model {d_model}"
            )
        base = getattr(t5.config, "_name_or_path", None)
        self.base_model_dir = str(Path(base).resolve()) if base and Path(base).is_dir() else None
        if cfg.lora is not None:
            t5 = _with_lora(t5, cfg.lora)
        self.module = nn.ModuleDict({"t5": t5, "fusion": fusion})
        self.device = resolve_device(device)
        self.to(self.device)
        self.eval()
        self.generator = torch.Generator().manual_seed(self.seed)
        self.version = 0
        self.eos_id = int(t5.config.eos_token_id)
        self.pad_id = int(t5.config.pad_token_id)
        self.start_id = int(t5.config.decoder_start_token_id or self.pad_id)

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls,
        model_dir: str | Path,
        vision_dir: str | Path | None = None,
        config: AutoUIConfig | None = None,
        device: str | torch.device = "cpu",
        seed: int = 0,
        options: AutoUIOptions | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> AutoUIAgent:
        """Load our saved agent, or an Auto-UI-Base style checkpoint plus a vision encoder.

        ``config`` replaces the saved agent's config (default: the saved one, or the defaults
        for a bare checkpoint); a run's ``options`` (its LoRA adapters), then ``overrides``
        (fields of `AutoUIConfig`: a run's ``agent.history``, ``agent.temperature``) go on
        top."""
        from transformers import AutoTokenizer, T5ForConditionalGeneration

        model_dir = Path(model_dir)
        if not model_dir.is_dir():
            raise ConfigError(f"AutoUI model directory {model_dir} does not exist")
        saved = read_json(model_dir / AGENT_FILE) if (model_dir / AGENT_FILE).exists() else None
        if saved is not None and config is None:
            try:
                config = AutoUIConfig(**saved["config"])
            except (KeyError, TypeError) as e:
                raise DataError(f"{model_dir / AGENT_FILE}: bad agent config ({e})") from None
        vision_dir = vision_dir or (saved or {}).get("vision_dir")
        if vision_dir is None:
            raise ConfigError(f"{model_dir}: no vision encoder directory given (vision_dir=...)")
        cfg = config or AutoUIConfig()
        if options is not None:
            cfg = options.apply(cfg)
        if overrides:
            cfg = dataclasses.replace(cfg, **overrides)
        base_dir = model_dir
        if saved is not None and saved.get("lora_base"):
            base_dir = Path(saved["lora_base"])
        with _quiet_transformers():  # Auto-UI's fusion keys are reported as unexpected
            t5 = T5ForConditionalGeneration.from_pretrained(str(base_dir))
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        vision = VisionEncoder.from_pretrained(vision_dir, cfg.vision_features)
        fusion = _load_fusion(model_dir)
        lora_cfg = cfg.lora
        if saved is not None and saved.get("lora_base"):
            cfg = dataclasses.replace(cfg, lora=None)
        agent = cls(t5, tokenizer, vision, fusion, cfg, device, vision_dir=vision_dir, seed=seed)
        if saved is not None and saved.get("lora_base"):
            agent._attach_saved_lora(model_dir / LORA_DIR, lora_cfg)
        agent.base_model_dir = str(base_dir.resolve())
        agent.version = int((saved or {}).get("version", 0))
        return agent

    def _attach_saved_lora(self, path: Path, lora: LoRASettings | None) -> None:
        from peft import PeftModel

        t5 = PeftModel.from_pretrained(self.module["t5"], str(path), is_trainable=True)
        self.module["t5"] = t5.to(self.device)
        self.config = dataclasses.replace(self.config, lora=lora or LoRASettings())

    @property
    def t5(self) -> nn.Module:
        """The T5 model to call (with LoRA layers injected when LoRA is on)."""
        m = self.module["t5"]
        return m.get_base_model() if hasattr(m, "get_base_model") else m

    def to(self, device: str | torch.device) -> AutoUIAgent:
        super().to(device)
        self.vision.to(self.device)
        return self

    # -- encoding ----------------------------------------------------------------------------
    def encode(self, observations: Sequence[Observation]):
        """Fused encoder states and the input attention mask."""
        from transformers.modeling_outputs import BaseModelOutput

        cfg = self.config
        texts = [input_text(o, cfg.history, AUTOUI_PRECISION) for o in observations]
        tok = self.tokenizer(
            texts,
            padding=True,
            truncation=True,
            max_length=AUTOUI_MAX_INPUT_TOKENS,
            return_tensors="pt",
        ).to(self.device)
        states = self.t5.encoder(input_ids=tok.input_ids, attention_mask=tok.attention_mask)
        image = self.vision(list(observations))
        fused = self.module["fusion"](states.last_hidden_state, image)
        return BaseModelOutput(last_hidden_state=fused), tok.attention_mask

    # -- acting ----------------------------------------------------------------------------
    @torch.no_grad()
    def generate(
        self, observations: Sequence[Observation], greedy: bool = False
    ) -> tuple[list[list[int]], list[float]]:
        """Token ids (ending with end-of-sequence unless cut) and their summed log-probs."""
        enc, mask = self.encode(observations)
        b = mask.shape[0]
        dec = torch.full((b, 1), self.start_id, dtype=torch.long, device=self.device)
        total = torch.zeros(b, dtype=torch.float64)
        done = torch.zeros(b, dtype=torch.bool)
        out: list[list[int]] = [[] for _ in range(b)]
        past = None
        for _ in range(self.config.max_new_tokens):
            res = self.t5(
                encoder_outputs=enc,
                attention_mask=mask,
                decoder_input_ids=dec,
                past_key_values=past,
                use_cache=True,
            )
            past = res.past_key_values
            logp = F.log_softmax(res.logits[:, -1].float() / self.temperature, -1).cpu()
            if greedy:
                tok = logp.argmax(-1)
            else:
                tok = torch.multinomial(logp.exp(), 1, generator=self.generator).squeeze(-1)
            picked = logp.gather(1, tok[:, None]).squeeze(1).double()
            for i in range(b):
                if not done[i]:
                    out[i].append(int(tok[i]))
                    total[i] += picked[i]
            done |= tok == self.eos_id
            if bool(done.all()):
                break
            dec = tok.to(self.device).unsqueeze(1)
        return out, total.tolist()

    def decode(self, ids: list[int]) -> str:
        body = ids[:-1] if ids and ids[-1] == self.eos_id else ids
        return self.tokenizer.decode(
            body, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )

    def target_ids(self, text: str) -> list[int]:
        """The canonical tokens teacher forcing scores for ``text`` (end-of-sequence last)."""
        ids = list(self.tokenizer(text, add_special_tokens=False).input_ids)
        return [*ids, self.eos_id]

    def act(
        self,
        observations: Sequence[Observation],
        greedy: bool = False,
        epsilon: Sequence[float] | None = None,
    ) -> list[ActionSample]:
        if not observations:
            return []
        ids, logps = self.generate(observations, greedy)
        texts = [self.decode(x) for x in ids]
        samples = [
            ActionSample(parse_autoui(t), t, lp, {"tokens": len(x), "policy_version": self.version})
            for t, x, lp in zip(texts, ids, logps)
        ]
        redo = [i for i, (t, x) in enumerate(zip(texts, ids)) if self.target_ids(t) != x]
        if redo:
            with torch.no_grad():
                fixed = self.log_prob(
                    [observations[i] for i in redo],
                    [samples[i].action for i in redo],
                    [texts[i] for i in redo],
                )
            for i, v in zip(redo, fixed.tolist()):
                cut = ids[i][-1:] != [self.eos_id]
                samples[i].extras["rescored"] = "cut at max_new_tokens" if cut else "retokenized"
                samples[i].log_prob = float(v)
        return samples

    # -- scoring ---------------------------------------------------------------------------
    def log_prob(
        self,
        observations: Sequence[Observation],
        actions: Sequence[Action],
        texts: Sequence[str | None] | None = None,
        *,
        floor: bool = True,
    ) -> torch.Tensor:
        """Teacher-forced log-probs (summed over tokens) of the actions' texts; differentiable
        (no exploration floor: ``floor`` changes nothing)."""
        check_batch(observations, actions, texts)
        if not observations:
            return torch.zeros(0, device=self.device)
        targets = [
            t if t is not None else format_autoui(a, precision=AUTOUI_PRECISION)
            for a, t in zip(actions, texts or [None] * len(actions))
        ]
        return self.score_ids(observations, [self.target_ids(t) for t in targets])

    def score_ids(
        self, observations: Sequence[Observation], labels: Sequence[Sequence[int]]
    ) -> torch.Tensor:
        """Teacher-forced log-prob of each token sequence (summed over its tokens)."""
        n = max(1, max(len(x) for x in labels))
        lab = torch.full((len(labels), n), self.pad_id, dtype=torch.long)
        keep = torch.zeros(len(labels), n, dtype=torch.bool)
        for i, x in enumerate(labels):
            lab[i, : len(x)] = torch.tensor(list(x), dtype=torch.long)
            keep[i, : len(x)] = True
        lab, keep = lab.to(self.device), keep.to(self.device)
        dec = torch.cat([torch.full_like(lab[:, :1], self.start_id), lab[:, :-1]], 1)
        enc, mask = self.encode(observations)
        logits = self.t5(encoder_outputs=enc, attention_mask=mask, decoder_input_ids=dec).logits
        logp = F.log_softmax(logits.float() / self.temperature, -1)
        tok_lp = logp.gather(2, lab.unsqueeze(-1)).squeeze(-1)
        return (tok_lp.double() * keep).sum(1).float()

    # -- persistence -------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write the T5 weights (or LoRA adapters), tokenizer, ``fusion.safetensors`` and
        ``autoui_agent.json``. The frozen vision encoder is referenced by its directory."""
        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        lora_base = None
        if self.config.lora is not None:
            self.module["t5"].save_pretrained(str(out / LORA_DIR))
            lora_base = self.base_model_dir
            if not lora_base:
                raise ConfigError("cannot save a LoRA agent whose base model has no directory")
        else:
            self.t5.save_pretrained(str(out))
        self.tokenizer.save_pretrained(str(out))
        save_fusion(self.module["fusion"], out / FUSION_FILE)
        cfg = dataclasses.asdict(self.config)
        meta = {"config": cfg, "version": self.version, "vision_dir": self.vision_dir}
        write_json(out / AGENT_FILE, {**meta, "lora_base": lora_base, "format": 1})

    def load(self, path: str | Path) -> None:
        """Load weights saved by `save` into this agent (same architecture)."""
        other = AutoUIAgent.from_pretrained(path, self.vision_dir, device="cpu")
        try:
            self.module.load_state_dict(other.module.state_dict())
        except RuntimeError as e:
            raise DataError(f"{path}: weights do not fit this agent ({e})") from None
        self.version = other.version


@contextlib.contextmanager
def _quiet_transformers():
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def _with_lora(t5: nn.Module, lora: LoRASettings) -> nn.Module:
    from peft import LoraConfig, TaskType, get_peft_model

    cfg = LoraConfig(
        task_type=TaskType.SEQ_2_SEQ_LM,
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=0.0,
        target_modules=list(lora.target_modules),
    )
    return get_peft_model(t5, cfg)


def _load_fusion(model_dir: Path) -> ImageFusion | None:
    if (model_dir / FUSION_FILE).exists():
        return load_fusion(model_dir / FUSION_FILE)
    state = fusion_state_from_checkpoint(model_dir)
    if state:
        heads = 1  # Auto-UI checkpoints use one head
        log.info("loaded Auto-UI fusion weights from %s", model_dir)
        return ImageFusion.from_state(state, heads)
    log.warning("%s: no fusion weights found; the image fusion starts from random init", model_dir)
    return None
