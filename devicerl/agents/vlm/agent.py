"""A policy from any Hugging Face image-text-to-text model (Qwen2-VL / 2.5-VL / 3-VL, Idefics3 /
SmolVLM, Gemma 3, ...): ``AutoModelForImageTextToText`` + ``AutoProcessor`` from a local folder.

The model speaks its family's action language: a codec (`devicerl.codecs`, ``VLMConfig.codec``;
by default the family's own, JSON for families without one) writes the prompt (the action space
as the family was trained to read it, the instruction, the previous actions as the family
writes its history, the screenshot) and reads the reply, mapping coordinates through the
geometry of the image the processor makes of the screenshot (`devicerl.agents.vlm.inputs`).
Text that does not parse becomes an invalid action the record keeps.
The exploration levels a collector may pass (``epsilon``) are ignored: sampling at
``temperature`` is this policy's exploration.

Acting is one batched ``generate`` over whatever observations are given (left padding, KV cache,
greedy or sampled at ``temperature``; the model's own generation defaults, such as a hub
checkpoint's top-k or repetition penalty, are replaced by plain sampling, so the sampled
distribution is ``softmax(logits / temperature)``). A logits processor records the log-prob of
each chosen token under that distribution, keeping one step's scores at a time (no stack of
vocabulary-sized logits). `log_prob` recomputes the same sum by teacher forcing: the prompt,
left-padded as in acting, then the text's canonical tokens and end-of-sequence. The text is the
one the policy generated when the step has one its codec reads as the stored action, else the
action written by the codec (`VLMInputs.targets`). Samples whose
tokens are not the canonical tokens of their text, or that stop at ``max_new_tokens``, report the
teacher-forced log-prob of the canonical spelling (``extras["rescored"]`` says why), so the
recorded and the recomputed log-probs agree. The multimodal placeholder tokens (image, video,
vision start/end) are masked out of the output distribution in both places: a generated image
token would make teacher forcing count more image tokens than images.

Training: LoRA through peft on the language model's projections (``VLMConfig.lora``; the
vision tower stays frozen and is never adapted) or the whole language model; gradient
checkpointing; bfloat16 on a GPU, float32 on a CPU (``dtype``). `get_weights` / `set_weights`
move the trainable weights only (the adapters with LoRA). `save` writes the adapters (peft's
safetensors folder) or the whole model, the processor and ``vlm_agent.json`` (the config with
its codec, the version and custom instructions, if any). ``seed`` (a run's ``agent.seed``)
seeds sampling and new adapters.

With ``VLMConfig.server`` the agent acts through an OpenAI-compatible server and pushes each new
version's weights there (`devicerl.agents.vlm.remote`); its own model then loads only when
something needs it (a learner's `log_prob`, a full-weight checkpoint), so a collector's copy
holds no weights.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from devicerl.actions import Action
from devicerl.agents.base import ActionSample, check_batch
from devicerl.agents.torch_policy import TorchPolicy, read_json, resolve_device, write_json
from devicerl.agents.vlm.config import (
    VLMConfig,
    VLMLoRA,
    VLMOptions,
    config_from_saved,
    lora_from_saved,
)
from devicerl.agents.vlm.inputs import VLMInputs, special_ids
from devicerl.agents.vlm.load import (
    is_vision_module,
    load_processor,
    lora_config,
    lora_targets,
    model_type,
    resolve_dtype,
)
from devicerl.agents.vlm.prompt import template_keeps_system
from devicerl.codecs import default_codec, make_codec
from devicerl.errors import ConfigError, DataError
from devicerl.records import Observation

log = logging.getLogger(__name__)
AGENT_FILE, LORA_DIR = "vlm_agent.json", "lora"
#: Config attributes naming tokens that stand for image or video content.
_PLACEHOLDERS = (
    "image_token_id", "image_token_index", "video_token_id", "video_token_index",
    "vision_start_token_id", "vision_end_token_id", "boi_token_index", "eoi_token_index",
    "boi_token_id", "eoi_token_id",
)  # fmt: skip
#: Processor outputs aligned with the tokens that are not the tokens or their mask (e.g.
#: ``mm_token_type_ids``, ``token_type_ids``): text tokens are 0 in them.
_TOKEN_KEYS = ("input_ids", "attention_mask")


class _Recorder:
    """A logits processor that masks the placeholder tokens and records the log-prob of each
    chosen token under ``softmax(logits / temperature)``. It runs before transformers'
    temperature warper, on the model's scores; the token chosen at step t is the last input
    at step t + 1 (the last one is read from the output)."""

    def __init__(self, temperature: float, banned: torch.Tensor) -> None:
        self.temperature = temperature
        self.banned = banned
        self.prev: torch.Tensor | None = None
        self.picked: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.prev is not None:
            self.take(input_ids[:, -1])
        if self.banned.numel():
            scores = scores.index_fill(1, self.banned.to(scores.device), float("-inf"))
        self.prev = F.log_softmax(scores.float() / self.temperature, -1)
        return scores

    def take(self, tokens: torch.Tensor) -> None:
        assert self.prev is not None
        self.picked.append(self.prev.gather(1, tokens[:, None].to(self.prev.device)).squeeze(1))
        self.prev = None


class VLMAgent(VLMInputs, TorchPolicy):
    """A Hugging Face vision-language model as a policy (see the module doc)."""

    @property
    def uses_history(self) -> bool:  # type: ignore[override]
        return self.config.history > 0

    def __init__(
        self,
        model: nn.Module | Callable[[], nn.Module],
        processor: Any,
        config: VLMConfig | None = None,
        device: str | torch.device = "cpu",
        base_dir: str | Path | None = None,
        *,
        seed: int = 0,
        system_prompt: str | None = None,
    ) -> None:
        """``model``: the model, or a function that loads it when first needed.
        ``system_prompt``: instructions replacing the codec's system message (the action space
        and its format); saved with the agent. A config without a codec takes the model
        family's (`devicerl.codecs.default_codec`)."""
        cfg = config or VLMConfig()
        if cfg.codec is None:
            family = getattr(getattr(model, "config", None), "model_type", None)
            cfg = dataclasses.replace(cfg, codec=default_codec(family))
        self.config = cfg
        cfg.validate()
        self.codec = make_codec(cfg.codec)
        self.temperature = cfg.temperature
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.tokenizer.padding_side = "left"
        self.base_dir = str(Path(base_dir).resolve()) if base_dir is not None else None
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(cfg.dtype, self.device)
        self.system_prompt = system_prompt
        self.special_ids = special_ids(self.tokenizer, self.codec)
        #: False for a chat template without a system role: instructions go in the user turn.
        self.system_role = template_keeps_system(processor)
        self.seed = int(seed)
        self.generator = torch.Generator().manual_seed(self.seed)
        self.version = 0
        self._module: nn.Module | None = None
        self._loader = model if not isinstance(model, nn.Module) else None
        self._remote: Any = None
        #: A saved agent's adapter folder (a server loads it before the first request).
        self.saved_adapter: Path | None = None
        # the tokenizer's end of sequence until the model's generation config is read
        self.eos_ids = [int(self.tokenizer.eos_token_id)]
        pad = self.tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else self.eos_ids[0])
        if isinstance(model, nn.Module):
            self._module = self._prepare(model)

    # -- the model ------------------------------------------------------------------------------
    @property
    def module(self) -> nn.Module:  # type: ignore[override]
        """The model (a `PeftModel` with LoRA), loaded on first use when given as a loader."""
        if self._module is None:
            assert self._loader is not None
            self._module = self._prepare(self._loader())
            self._loader = None
        return self._module

    @property
    def loaded(self) -> bool:
        return self._module is not None

    @property
    def model(self) -> nn.Module:
        """The transformers model to call (LoRA layers injected when LoRA is on)."""
        m = self.module
        return m.get_base_model() if hasattr(m, "get_base_model") else m

    def _prepare(self, model: nn.Module) -> nn.Module:
        """Dtype, device, frozen parts, LoRA and generation defaults of a freshly loaded model."""
        from transformers import GenerationConfig

        cfg = self.config
        model = model.to(self.device, self.dtype)
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        eos = base.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        self.eos_ids = [int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])]
        pad = self.tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else self.eos_ids[0])
        # plain sampling: a checkpoint's own defaults (top-k, top-p, repetition penalty) would
        # change the distribution the log-probs are computed under
        base.generation_config = GenerationConfig(
            eos_token_id=self.eos_ids,
            pad_token_id=self.pad_id,
            bos_token_id=base.generation_config.bos_token_id,
        )
        self.banned = self._placeholder_ids(base)
        if hasattr(model, "peft_config"):  # a saved agent's adapters, loaded by peft
            for name, p in model.named_parameters():
                p.requires_grad_(".lora_" in name)
        elif cfg.lora is not None:
            model = self._with_lora(model, cfg.lora)
        else:
            for name, p in model.named_parameters():
                p.requires_grad_(not is_vision_module(name))
        if cfg.gradient_checkpointing:  # transformers 5 renamed it (the old name warns)
            enable = getattr(base, "activation_checkpointing_enable", None)
            (enable or base.gradient_checkpointing_enable)({"use_reentrant": False})
        model.eval()
        return model

    def _with_lora(self, model: nn.Module, lora: VLMLoRA) -> nn.Module:
        from peft import get_peft_model

        targets = lora_targets(model, lora)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            peft = get_peft_model(model, lora_config(lora, targets, self.base_dir))
        return peft.to(self.device)

    @staticmethod
    def _placeholder_ids(model: nn.Module) -> torch.Tensor:
        ids: set[int] = set()
        config = model.config
        vocab = config.get_text_config().vocab_size
        for attr in _PLACEHOLDERS:
            value = getattr(config, attr, None)
            if isinstance(value, int) and 0 <= value < vocab:
                ids.add(value)
        return torch.tensor(sorted(ids), dtype=torch.long)

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        config: VLMConfig | None = None,
        device: str | torch.device = "cpu",
        *,
        seed: int = 0,
        system_prompt: str | None = None,
        attn_implementation: str | None = None,
        options: VLMOptions | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> VLMAgent:
        """A saved agent (`save`) or any local transformers image-text-to-text model folder.

        ``config`` None: the saved agent's own (older saved configs load too, see
        `config_from_saved`), or the defaults for a bare model folder; a run's ``options``
        (``agent.vlm``), then ``overrides`` (fields of `VLMConfig`: a run's ``agent.history``,
        ``agent.include_elements``, ``agent.temperature``) go on top. ``system_prompt`` None: the
        saved agent's instructions, if it had its own, else the generated ones.
        ``attn_implementation``: transformers' attention kernel (sdpa, eager, flash_attention_2;
        None: its default)."""
        path = Path(path)
        if not path.is_dir():
            raise ConfigError(f"VLM model directory {path} does not exist")
        saved = read_json(path / AGENT_FILE) if (path / AGENT_FILE).exists() else None
        lora: VLMLoRA | None = None
        if saved is not None:
            try:
                if config is None:
                    config = config_from_saved(saved["config"])
                if saved.get("lora"):
                    lora = lora_from_saved(saved["lora"])
            except (KeyError, TypeError, ValueError, ConfigError) as e:
                raise DataError(f"{path / AGENT_FILE}: bad agent config ({e})") from None
            if system_prompt is None:  # older agents kept it in their config
                old = saved.get("config")
                older = old.get("system_prompt") if isinstance(old, dict) else None
                system_prompt = saved.get("system_prompt") or older
        cfg = config or VLMConfig()
        if options is not None:
            cfg = options.apply(cfg)
        if overrides:
            cfg = dataclasses.replace(cfg, **overrides)
        adapters = path / LORA_DIR if lora is not None else None
        base = Path(saved["base_dir"]) if adapters is not None and saved else path
        if lora is not None and cfg.lora is None:
            cfg = dataclasses.replace(cfg, lora=lora)
        if cfg.codec is None:  # a bare model folder: its family's own language
            cfg = dataclasses.replace(cfg, codec=default_codec(model_type(base)))
        if not base.is_dir():
            raise ConfigError(f"{path}: its base model directory {base} does not exist")
        try:
            processor = load_processor(path)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"{path}: cannot load its processor ({_first_line(e)})") from None
        if not hasattr(processor, "image_processor") or not hasattr(processor, "tokenizer"):
            raise ConfigError(
                f"{path}: not a vision-language model folder (its processor is a "
                f"{type(processor).__name__}, with no image processor)"
            )
        dev = resolve_device(device)

        def load() -> nn.Module:
            from transformers import AutoModelForImageTextToText

            kwargs: dict[str, Any] = {"dtype": resolve_dtype(cfg.dtype, dev)}
            if attn_implementation:
                kwargs["attn_implementation"] = attn_implementation
            try:
                model = AutoModelForImageTextToText.from_pretrained(str(base), **kwargs)
            except (OSError, ValueError, KeyError) as e:
                raise ConfigError(
                    f"{base}: not an image-text-to-text model ({_first_line(e)})"
                ) from None
            if adapters is not None:
                from peft import PeftModel

                model = PeftModel.from_pretrained(model, str(adapters), is_trainable=True)
            return model

        model = load if cfg.server is not None else load()
        agent = cls(model, processor, cfg, dev, base, seed=seed, system_prompt=system_prompt)
        agent.version = int((saved or {}).get("version", 0))
        if adapters is not None:
            agent.saved_adapter = adapters
        return agent

    # -- acting ---------------------------------------------------------------------------------
    @torch.no_grad()
    def generate_ids(
        self,
        inputs: Mapping[str, torch.Tensor],
        greedy: bool,
        temperature: float | None = None,
        max_new_tokens: int | None = None,
    ) -> tuple[list[list[int]], list[list[float]]]:
        """Generated token ids per row (ending with end-of-sequence unless cut) and each token's
        log-prob at ``temperature`` (the agent's by default)."""
        from transformers import LogitsProcessorList

        t = self.temperature if temperature is None else temperature
        recorder = _Recorder(t, self.banned)
        kwargs: dict[str, Any] = dict(
            max_new_tokens=max_new_tokens or self.config.max_new_tokens,
            do_sample=not greedy,
            logits_processor=LogitsProcessorList([recorder]),
            return_dict_in_generate=True,
        )
        if not greedy:
            kwargs.update(temperature=t, top_k=0, top_p=1.0)
        devices = [self.device] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            if not greedy:  # transformers samples from torch's global generator
                torch.manual_seed(int(torch.randint(2**62, (1,), generator=self.generator)))
            out = self.model.generate(**inputs, **kwargs)
        new = out.sequences[:, inputs["input_ids"].shape[1] :]
        if recorder.prev is not None and len(recorder.picked) < new.shape[1]:
            recorder.take(new[:, len(recorder.picked)])
        logps = torch.stack(recorder.picked, 1).double().cpu() if recorder.picked else None
        ids: list[list[int]] = []
        lps: list[list[float]] = []
        for i, row in enumerate(new.tolist()):
            n = next((j + 1 for j, tok in enumerate(row) if tok in self.eos_ids), len(row))
            ids.append(row[:n])
            lps.append(logps[i, :n].tolist() if logps is not None else [])
        return ids, lps

    def decode(self, ids: Sequence[int]) -> str:
        body = list(ids[:-1]) if ids and ids[-1] in self.eos_ids else list(ids)
        return self.tokenizer.decode(
            body, skip_special_tokens=False, clean_up_tokenization_spaces=False
        )

    def act(
        self,
        observations: Sequence[Observation],
        greedy: bool = False,
        epsilon: Sequence[float] | None = None,
    ) -> list[ActionSample]:
        """One action per observation, generated (``epsilon`` is ignored: see the module doc)."""
        if not observations:
            return []
        if self.config.server is not None:
            return self.remote.act(observations, greedy)
        self.module  # noqa: B018  (loads a lazily loaded model)
        inputs, geometries = self.prepare(observations)
        ids, lps = self.generate_ids(inputs, greedy)
        texts = [self.decode(x) for x in ids]
        samples = [
            ActionSample(
                self.codec.parse(t, g),
                t,
                float(sum(lp)),
                {"tokens": len(x), "policy_version": self.version},
            )
            for t, x, lp, g in zip(texts, ids, lps, geometries)
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
                cut = ids[i][-1:] == [] or ids[i][-1] not in self.eos_ids
                samples[i].extras["rescored"] = "cut at max_new_tokens" if cut else "retokenized"
                samples[i].log_prob = float(v)
        return samples

    # -- scoring --------------------------------------------------------------------------------
    def log_prob(
        self,
        observations: Sequence[Observation],
        actions: Sequence[Action],
        texts: Sequence[str | None] | None = None,
        *,
        floor: bool = True,
        epsilon: Sequence[float] | None = None,
    ) -> torch.Tensor:
        """Teacher-forced log-probs (summed over tokens, end-of-sequence included) of the
        recorded texts the codec reads as their actions, else of the actions written by the
        codec (`VLMInputs.targets`); differentiable. ``floor`` and ``epsilon`` change nothing
        (no exploration floor)."""
        check_batch(observations, actions, texts)
        if not observations:
            return torch.zeros(0, device=self.device)
        inputs, geometries = self.prepare(observations)
        targets = self.targets(actions, texts or [None] * len(actions), geometries)
        return self.score_ids(inputs, [self.target_ids(t) for t in targets])

    def score_ids(
        self, inputs: Mapping[str, torch.Tensor], labels: Sequence[Sequence[int]]
    ) -> torch.Tensor:
        """Teacher-forced log-prob of each token sequence after its prompt (summed)."""
        ids = inputs["input_ids"]
        b, n = ids.shape
        t = max(1, max(len(x) for x in labels))
        lab = torch.full((b, t), self.pad_id, dtype=torch.long)
        keep = torch.zeros(b, t, dtype=torch.bool)
        for i, x in enumerate(labels):
            lab[i, : len(x)] = torch.tensor(list(x), dtype=torch.long)
            keep[i, : len(x)] = True
        lab, keep = lab.to(self.device), keep.to(self.device)
        full = dict(inputs)
        full["input_ids"] = torch.cat([ids, lab], 1)
        full["attention_mask"] = torch.cat([inputs["attention_mask"], keep.long()], 1)
        for key, value in inputs.items():  # token-aligned extras: text tokens are 0
            if key not in _TOKEN_KEYS and value.dim() == 2 and value.shape == (b, n):
                full[key] = torch.cat([value, torch.zeros_like(lab, dtype=value.dtype)], 1)
        model = self.model
        keep_only = "logits_to_keep" in inspect.signature(model.forward).parameters
        extra = {"logits_to_keep": t + 1} if keep_only else {}  # no logits for the prompt
        out = model(**full, use_cache=False, **extra)
        logits = out.logits[:, -(t + 1) : -1].float()
        if self.banned.numel():
            logits = logits.index_fill(2, self.banned.to(logits.device), float("-inf"))
        logp = F.log_softmax(logits / self.temperature, -1)
        tok_lp = logp.gather(2, lab.unsqueeze(-1)).squeeze(-1)
        return tok_lp.masked_fill(~keep, 0.0).double().sum(1).float()

    # -- weights ---------------------------------------------------------------------------------
    def set_weights(self, weights: Mapping[str, Any], version: int | None = None) -> None:
        """Load published weights; with a server, also push them there (a collector's copy
        that has not loaded its model only pushes adapters; a full checkpoint loads it)."""
        server = self.config.server
        if server is None or self.loaded or server.sync == "checkpoint":
            super().set_weights(weights, version)
        else:
            self.version = self.version + 1 if version is None else int(version)
        if server is not None:
            self.remote.push(weights, self.version)

    @property
    def remote(self) -> Any:
        """The server this agent acts through (``VLMConfig.server``)."""
        if self._remote is None:
            from devicerl.agents.vlm.remote import ServedPolicy

            if self.config.server is None:
                raise ConfigError("this VLM agent has no server (vlm.server)")
            self._remote = ServedPolicy(self, self.config.server)
        return self._remote

    def close(self) -> None:
        if self._remote is not None:
            self._remote.close()

    # -- persistence ---------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write the LoRA adapters (peft's safetensors folder, the base model referenced by its
        directory) or the whole model, the processor and ``vlm_agent.json``."""
        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        cfg = self.config
        lora = None
        if cfg.lora is not None:
            if not self.base_dir:
                raise ConfigError("cannot save a LoRA agent whose base model has no directory")
            self.module.save_pretrained(str(out / LORA_DIR))
            lora = dataclasses.asdict(cfg.lora)
        else:
            self.model.save_pretrained(str(out))
        self.processor.save_pretrained(str(out))
        meta = {
            "config": dataclasses.asdict(cfg),
            "version": self.version,
            "base_dir": self.base_dir if lora else None,
            "lora": lora,
            "system_prompt": self.system_prompt,
            "format": 1,
        }
        write_json(out / AGENT_FILE, meta)

    def load(self, path: str | Path) -> None:
        """Load weights saved by `save` into this agent (same architecture)."""
        other = VLMAgent.from_pretrained(path, dataclasses.replace(self.config, server=None))
        try:
            self.set_weights(other.get_weights(), other.version)
        except DataError as e:
            raise DataError(f"{path}: weights do not fit this agent ({e})") from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]
