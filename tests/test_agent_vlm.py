"""The vision-language agent on tiny random models of real families, built in code: prompts,
action texts, batched generation and exact log-probs."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch
from vlm_helpers import observations

from devicerl.actions import Action
from devicerl.agents.factory import make_agent
from devicerl.agents.vlm.agent import VLMAgent
from devicerl.agents.vlm.config import VLMConfig, VLMOptions
from devicerl.agents.vlm.prompt import template_keeps_system
from devicerl.codecs.docs import ACTION_DOCS
from devicerl.codecs.json_actions import format_action, parse_action, system_text
from devicerl.envs import make
from devicerl.errors import ConfigError
from devicerl.records import Observation, Step
from devicerl.testing.autoui_tiny import build_tiny_autoui
from devicerl.testing.vlm_tiny import FAMILIES, build_tiny_vlm

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("vlm")
    return {f: build_tiny_vlm(root / f, f) for f in FAMILIES}


def _agent(models, family: str = "qwen2_vl", seed: int = 0, **kw) -> VLMAgent:
    config = VLMConfig(**{"max_new_tokens": 12, **kw})
    return VLMAgent.from_pretrained(models[family], config, seed=seed)


#: Qwen-style chat templates of models without a system role: one raises on a system message
#: (as Gemma 2's and Mistral's do), one leaves it out, one prints content as a plain string.
_TURN = (
    "<|im_start|>{{ m['role'] }}\n{% for p in m['content'] %}{% if p['type'] == 'image' %}"
    "<|vision_start|><|image_pad|><|vision_end|>{% else %}{{ p['text'] }}{% endif %}{% endfor %}"
    "<|im_end|>\n"
)
_END = "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
RAISES = (
    "{% for m in messages %}{% if m['role'] == 'system' %}"
    "{{ raise_exception('System role not supported') }}{% endif %}" + _TURN + "{% endfor %}" + _END
)
DROPS = "{% for m in messages %}{% if m['role'] != 'system' %}" + _TURN + "{% endif %}{% endfor %}"
DROPS += _END
RAW = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
RAW += "{% endfor %}" + _END
#: Gemma 3's way: the system text opens the first user turn.
FOLDS = (
    "{% set sys = messages[0]['content'][0]['text'] + '\n\n' if messages[0]['role'] == "
    "'system' else '' %}{% for m in messages if m['role'] != 'system' %}<|im_start|>"
    "{{ m['role'] }}\n{{ sys if loop.first else '' }}{% for p in m['content'] %}"
    "{% if p['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>{% else %}"
    "{{ p['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endfor %}" + _END
)


def _with_template(processor, template: str):
    other = copy.copy(processor)
    other.chat_template = template
    return other


# -- action texts and prompt ----------------------------------------------------------------------
def test_every_documented_action_round_trips_through_its_text() -> None:
    for doc in ACTION_DOCS:
        for action in doc.examples:
            assert parse_action(format_action(action)) == action
    assert format_action(Action.tap(0.25, 0.5)) == '{"type": "DUAL_POINT", "touch": [0.25, 0.5]}'
    assert format_action(Action.tap(0.12345, 0.5)).endswith("[0.123, 0.5]}")


def test_unreadable_text_becomes_an_invalid_action_never_an_exception() -> None:
    junk = ["", "no json here", "{", '{"type": "FLY"}', '{"type": "DUAL_POINT"}', "[1, 2]",
            '{"type": "DUAL_POINT", "touch": [2, 0.5]}', '{"type": "INVALID", "raw": "x"}',
            "{" * 5000, '{"type": "TYPE", "text": 5}']  # fmt: skip
    for text in junk:
        action = parse_action(text)
        assert action.is_invalid and action.raw == text and action.reason, text
    assert parse_action('I tap: {"type": "PRESS_BACK"} done') == Action.back()
    assert parse_action('{"a": {"b": 1}} {"type": "PRESS_HOME"}').is_invalid  # first object
    # AutoUI's text is not this agent's format
    assert parse_action('Action Plan: [] ; Action Decision: "action_type": "PRESS_BACK"').is_invalid


def test_prompt_has_screenshot_instruction_and_previous_actions(models) -> None:
    agent = _agent(models)
    obs = observations(3)[2]
    chat = agent.messages(obs, has_image=True)
    assert chat[0]["role"] == "system" and "DUAL_POINT" in chat[0]["content"][0]["text"]
    assert chat[1]["content"][0] == {"type": "image"}
    text = chat[1]["content"][1]["text"]
    assert text.startswith(f"Instruction: {obs.instruction}\nPrevious actions:\n")
    assert '{"type": "DUAL_POINT", "touch": [0.1, 0.2]}' in text and "UI elements" not in text
    listing = _agent(models, include_elements=True).messages(obs, has_image=True)
    assert "box" in listing[1]["content"][1]["text"] and "UI elements:" in str(listing)
    assert "[x, y]" in system_text() and "[y, x]" not in system_text()
    prompt = agent.processor.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    assert prompt.count("<|image_pad|>") == 1 and prompt.endswith("<|im_start|>assistant\n")
    own = VLMAgent(agent.module, agent.processor, agent.config, system_prompt="Tap things.")
    assert own.messages(obs, True)[0]["content"][0]["text"] == "Tap things."


def test_every_tested_family_keeps_its_system_message(models) -> None:
    for family in FAMILIES:
        agent = _agent(models, family)
        assert agent.system_role, family
        prompt = agent.processor.apply_chat_template(
            agent.messages(observations(1)[0], True), add_generation_prompt=True, tokenize=False
        )
        assert agent.instructions(agent.geometry(observations(1)[0])) in prompt, family
    folds = _with_template(agent.processor, FOLDS)
    assert template_keeps_system(folds)  # Gemma 3's template folds it into the user turn


@pytest.mark.parametrize("template", [RAISES, DROPS, RAW], ids=["raises", "drops", "raw"])
def test_templates_without_a_system_role_get_the_instructions_in_the_user_turn(
    models, template
) -> None:
    agent = _agent(models)
    processor = _with_template(agent.processor, template)
    assert not template_keeps_system(processor)
    inline = VLMAgent(agent.module, processor, agent.config)
    assert not inline.system_role
    obs = observations(3)
    chat = inline.messages(obs[2], True)
    system = system_text()
    assert [m["role"] for m in chat] == ["user"] and chat[0]["content"][0] == {"type": "image"}
    assert chat[0]["content"][1]["text"].startswith(system + "\n\nInstruction: ")
    if template is RAW:
        return
    prompt = processor.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    assert system in prompt and prompt.count("<|image_pad|>") == 1
    samples = inline.act(obs)  # acting and scoring through the template, end to end
    lp = inline.log_prob(obs, [s.action for s in samples], [s.text for s in samples])
    assert torch.allclose(lp.detach(), torch.tensor([s.log_prob for s in samples]), atol=1e-4)


# -- generation and log-probs ---------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_generation_log_probs_equal_teacher_forcing_padded_and_unpadded(models, family) -> None:
    """The log-prob recorded while generating (KV cache, left padding, multimodal positions)
    equals teacher forcing on the same tokens, batched with rows of other lengths and alone."""
    agent = _agent(models, family, temperature=0.7)
    with torch.no_grad():  # random adapters' worth of noise: logits far from uniform
        for p in agent.module.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    obs = observations(5)
    obs[4] = dataclasses.replace(obs[4], screenshot=None)  # a text-only row in the batch
    inputs = agent.encode(obs)
    assert (inputs["attention_mask"] == 0).any()  # the batch is padded
    ids, lps = agent.generate_ids(inputs, greedy=False)
    assert all(len(x) == len(lp) > 0 for x, lp in zip(ids, lps))
    with torch.no_grad():
        batched = agent.score_ids(agent.encode(obs), ids)
        alone = [float(agent.score_ids(agent.encode([o]), [x])) for o, x in zip(obs, ids)]
        reordered = agent.score_ids(agent.encode(obs[::-1]), ids[::-1]).flip(0)
    sampled = torch.tensor([sum(lp) for lp in lps])
    assert torch.allclose(batched, sampled, atol=1e-4), (batched, sampled)
    assert torch.allclose(torch.tensor(alone), sampled, atol=1e-4)
    assert torch.allclose(reordered, sampled, atol=1e-4)


@pytest.mark.parametrize("family", ["qwen2_vl", "idefics3"])
def test_act_records_the_log_prob_that_log_prob_recomputes(models, family) -> None:
    agent = _agent(models, family, temperature=1.3)
    obs = observations(6)
    for greedy in (False, True):
        samples = agent.act(obs, greedy=greedy)
        assert all(s.extras["policy_version"] == 0 for s in samples)
        lp = agent.log_prob(obs, [s.action for s in samples], [s.text for s in samples])
        recorded = torch.tensor([s.log_prob for s in samples])
        assert torch.allclose(lp.detach(), recorded, atol=1e-4)
    # the agent's temperature is used in both places: another one gives other log-probs
    agent.temperature = 1.0
    with torch.no_grad():
        other = agent.log_prob(obs, [s.action for s in samples], [s.text for s in samples])
    assert not torch.allclose(other, recorded, atol=1e-2)


def test_samples_that_end_by_themselves_keep_their_generated_log_prob(models) -> None:
    """After a few imitation steps the model writes the action and stops: the sample is its
    text's canonical tokens and keeps the log-prob recorded while generating."""
    agent = _agent(models, max_new_tokens=40)
    obs = observations(2)
    opt = torch.optim.Adam(agent.parameters(), lr=1e-2)
    for _ in range(40):
        loss = -agent.log_prob(obs, [Action.back()] * 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    samples = agent.act(obs, greedy=True)
    assert [s.action for s in samples] == [Action.back()] * 2, [s.text for s in samples]
    assert all("rescored" not in s.extras for s in samples)
    lp = agent.log_prob(obs, [s.action for s in samples], [s.text for s in samples])
    assert torch.allclose(lp.detach(), torch.tensor([s.log_prob for s in samples]), atol=1e-4)
    assert all(s.log_prob > -1.0 for s in samples)


def test_greedy_is_deterministic_and_sampling_follows_the_seed(models) -> None:
    obs = observations(3)
    a, b = _agent(models, seed=1), _agent(models, seed=1)
    assert [s.text for s in a.act(obs, greedy=True)] == [s.text for s in a.act(obs, greedy=True)]
    assert [s.text for s in a.act(obs)] == [s.text for s in b.act(obs)]  # greedy draws no seed
    assert [s.text for s in a.act(obs)] != [s.text for s in _agent(models, seed=2).act(obs)]
    # exploration levels are the collector's business: sampling at the temperature is the VLM's
    c, d = _agent(models, seed=4), _agent(models, seed=4)
    assert [s.text for s in c.act(obs, epsilon=[0.9] * 3)] == [s.text for s in d.act(obs)]
    acts = [Action.back()] * 3
    with torch.no_grad():
        assert torch.equal(c.log_prob(obs, acts, epsilon=[0.9] * 3), c.log_prob(obs, acts))


def test_fuzzed_output_becomes_invalid_no_op_actions_the_record_keeps(models) -> None:
    agent = _agent(models, temperature=3.0)
    env = make("synthetic/tap", n_boxes=3, screen=(64, 96))
    obs = env.reset(seed=1)
    sample = agent.act([obs])[0]
    assert sample.action.is_invalid and isinstance(sample.text, str)
    assert np.isfinite(sample.log_prob)
    res = env.step(sample.action)
    assert res.info["invalid_action"] == sample.action.reason
    assert res.observation.elements == obs.elements  # a no-op
    step = Step(obs, sample.action, res.reward, text=sample.text, log_prob=sample.log_prob)
    again = Action.from_json(step.action.to_json())
    assert again.raw == sample.text and again.reason == sample.action.reason
    # the stored text is scored as it was generated
    lp = agent.log_prob([obs], [step.action], [step.text])
    assert abs(float(lp.detach()) - sample.log_prob) < 1e-4
    env.close()


def test_canonical_text_of_actions_without_recorded_text(models) -> None:
    agent = _agent(models)
    obs = observations(2, history=False)
    acts = [Action.tap(0.5, 0.25), Action.type_text('say "hi", <|im_end|> then go')]
    lp = agent.log_prob(obs, acts)
    texts = [format_action(a) for a in acts]
    assert torch.allclose(lp, agent.log_prob(obs, acts, texts))
    assert agent.target_ids(texts[1]).count(agent.eos_ids[0]) == 1  # special text spelled out
    assert lp.requires_grad and torch.isfinite(lp).all()


def test_loading_errors_and_the_factory(models, tmp_path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        VLMAgent.from_pretrained(tmp_path / "nothing")
    t5, _ = build_tiny_autoui(tmp_path / "t5")
    with pytest.raises(ConfigError, match="not a vision-language model folder"):
        VLMAgent.from_pretrained(t5)
    with pytest.raises(ConfigError, match="temperature"):
        VLMConfig(temperature=0)
    spec = dict(path=str(models["qwen3_vl"]), vlm=VLMOptions(max_new_tokens=4), seed=7)
    agent = make_agent("vlm", **spec)
    assert isinstance(agent, VLMAgent) and agent.trainable and agent.uses_history
    assert agent.seed == 7  # the run's agent.seed
    obs = observations(2)
    assert [s.text for s in agent.act(obs)] == [s.text for s in make_agent("vlm", **spec).act(obs)]
    assert len(agent.act([Observation("Tap OK", (10, 10))])) == 1  # no screenshot: text only
    with pytest.raises(ConfigError, match="needs a model directory"):
        make_agent("vlm")
    # the agent-wide settings go on top; null keeps the saved agent's (or the defaults)
    assert (agent.config.history, agent.config.include_elements, agent.temperature) == (
        4, False, 1.0
    )  # fmt: skip
    tuned = make_agent("vlm", **spec, history=1, include_elements=True, temperature=0.7)
    assert (tuned.config.history, tuned.config.include_elements) == (1, True)
    assert tuned.temperature == tuned.config.temperature == 0.7 and tuned.config.max_new_tokens == 4
    tuned.save(tmp_path / "saved")
    kept = make_agent("vlm", path=str(tmp_path / "saved"), vlm=VLMOptions(max_new_tokens=8))
    assert (kept.config.history, kept.config.include_elements, kept.temperature) == (1, True, 0.7)
    assert kept.config.max_new_tokens == 8  # the run's options replace the saved ones
