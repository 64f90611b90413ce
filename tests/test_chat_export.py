"""The chat fine-tuning export: rows hold exactly the chat `VLMAgent` reads and the action text it
parses, the filters (success, tasks, judge verdict) choose the episodes, the Hugging Face folder
loads, and a tiny model fine-tuned on the rows alone (their images and messages through the
model's own chat template, as any trainer reads them) then acts through `VLMAgent` as the rows
taught it."""

from __future__ import annotations

import json

import pytest
import torch

from devicerl.actions import Action
from devicerl.agents.random import RandomPolicy
from devicerl.agents.scripted import SyntheticOracle
from devicerl.agents.vlm.agent import VLMAgent
from devicerl.agents.vlm.config import VLMConfig
from devicerl.cli.main import main
from devicerl.codecs.json_actions import format_action, parse_action
from devicerl.data.store import TrajectoryStore, TrajectoryWriter
from devicerl.envs import make
from devicerl.records import Judgement
from devicerl.runtime.acting.rollout import rollout
from devicerl.testing.vlm_tiny import build_tiny_vlm

SCREEN = (64, 96)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run folder: oracle episodes (all solved, one labelled by a judge) and random ones."""
    root = tmp_path_factory.mktemp("chat") / "run"
    env = make("synthetic", screen=SCREEN, n_boxes=3)
    solved = [rollout(env, SyntheticOracle(), "synthetic/type", seed=s) for s in range(2)]
    solved += [rollout(env, SyntheticOracle(), "synthetic/tap", seed=s) for s in range(4)]
    random = [rollout(env, RandomPolicy(seed=1), "synthetic/tap", seed=10 + s) for s in range(6)]
    env.close()
    assert all(t.success for t in solved) and not all(t.success for t in random)
    solved[0].judgement = Judgement({"label": "success", "judge": "vlm"}, True)
    for t in solved:
        t.extras["by"] = "oracle"
    with TrajectoryWriter(root / "trajectories") as w:
        w.extend(solved + random)
    return root


def _rows(folder) -> list[dict]:
    return [json.loads(s) for s in (folder / "chat.jsonl").read_text().splitlines()]


def test_rows_hold_the_agents_own_chat_and_filters_choose_episodes(run, tmp_path, capsys):
    out = tmp_path / "chat"
    assert main(["export", str(run), "--format", "chat", "--out", str(out), "success=true"]) == 0
    stored = {t.episode_id: t for t in TrajectoryStore(run / "trajectories").read_all()}
    solved = {e for e, t in stored.items() if t.success}
    said = capsys.readouterr().out
    assert said.startswith("exported ") and f"chat rows from {len(solved)} trajectories" in said
    rows = _rows(out)
    assert {r["episode_id"] for r in rows} == solved
    agent = VLMAgent.from_pretrained(build_tiny_vlm(tmp_path / "m", "qwen2_vl"), VLMConfig())
    for row in rows:
        t = stored[row["episode_id"]]
        obs = t.agent_observation(row["step"])
        assert row["messages"][:-1] == agent.messages(obs, has_image=True)
        answer = row["messages"][-1]
        assert answer["role"] == "assistant"
        action = t.steps[row["step"]].action  # as the policy writes it: 3 decimals
        assert answer["content"][0]["text"] == format_action(action)
        assert parse_action(format_action(action)).describe() == action.describe()
        assert (out / row["images"][0]).is_file() and row["codec"] == "json"
    typed = [r for r in rows if r["task"] == "synthetic/type"]
    assert any(json.loads(r["messages"][-1]["content"][0]["text"])["type"] == "TYPE" for r in typed)
    later = next(r for r in typed if r["step"] > 0)  # earlier actions are in the prompt
    assert "Previous actions:\n{" in later["messages"][1]["content"][1]["text"]

    import datasets

    ds = datasets.load_from_disk(str(out / "hf"))
    assert len(ds) == len(rows) and ds[0]["messages"][-1]["role"] == "assistant"
    assert ds[0]["images"][0].size == SCREEN

    only = tmp_path / "tap"
    assert main(["export", str(run), "--format", "chat", "--out", str(only),
                 "tasks=[synthetic/tap]", "verdict=success"]) == 2  # fmt: skip
    assert "no episode to export: none matches the filters" in capsys.readouterr().err
    assert not only.exists()
    assert main(["export", str(run), "--format", "chat", "--out", str(only),
                 "tasks=[synthetic/type]", "verdict=success"]) == 0  # fmt: skip
    assert {r["episode_id"] for r in _rows(only)} == {
        t.episode_id for t in stored.values() if t.judgement is not None
    }  # fmt: skip
    assert main(["export", str(run), "--format", "chat", "--out", str(tmp_path / "x"),
                 "chat.codec=qwen"]) == 2  # fmt: skip
    assert "chat.codec: 'qwen' is not one of json, autoui, mobile_use" in capsys.readouterr().err


@pytest.mark.parametrize("image_size", [None, (128, 192)])
def test_rows_in_a_native_codec_are_what_the_agent_of_that_codec_reads(run, tmp_path, image_size):
    """A ``mobile_use`` export: each row's chat is the one a Qwen2.5-VL agent speaking
    ``mobile_use`` builds (its tool schema, coordinates in the frame the real processor makes of
    the image it is given: the export's resized screenshot too; a tiny model's processor makes
    other frames), and each answer reads back as the step's action."""
    out = tmp_path / "mobile"
    size = [] if image_size is None else [f"chat.image_size=[{image_size[0]}, {image_size[1]}]"]
    assert main(["export", str(run), "--format", "chat", "--out", str(out), "success=true",
                 "chat.codec=mobile_use", *size]) == 0  # fmt: skip
    stored = {t.episode_id: t for t in TrajectoryStore(run / "trajectories").read_all()}
    model = build_tiny_vlm(tmp_path / "m", "qwen2_5_vl")
    agent = VLMAgent.from_pretrained(model, VLMConfig(codec="mobile_use", image_size=image_size))
    rows = _rows(out)
    assert rows and {r["codec"] for r in rows} == {"mobile_use"}
    for row in rows:
        t = stored[row["episode_id"]]
        obs = t.agent_observation(row["step"])
        shown = agent.image(obs).size  # (width, height) of the image the model is given
        frame = agent.codec.served(*shown)
        assert frame.size != shown or image_size is None  # resized by the processor's rule
        assert row["messages"][:-1] == agent.messages(obs, has_image=True, geometry=frame)
        text = row["messages"][-1]["content"][0]["text"]
        action = t.steps[row["step"]].action
        assert "<tool_call>" in text and agent.codec.parse(text, frame).type == action.type


def _sft(model, processor, rows, folder, steps: int) -> None:
    """Plain supervised fine-tuning on the rows as any trainer reads them: the chat template
    over the messages before the answer, the image, and the answer's tokens as targets."""
    from PIL import Image

    tok = processor.tokenizer
    batches = []
    for row in rows:
        prompt = processor.apply_chat_template(row["messages"][:-1], add_generation_prompt=True,
                                               tokenize=False)  # fmt: skip
        image = Image.open(folder / row["images"][0]).convert("RGB")
        inputs = processor(text=[prompt], images=[[image]], return_tensors="pt")
        answer = row["messages"][-1]["content"][0]["text"]
        target = [*tok(answer, add_special_tokens=False).input_ids, tok.eos_token_id]
        n = inputs["input_ids"].shape[1]
        batch = {}
        for k, v in inputs.items():  # token-aligned outputs (mm_token_type_ids) get 0s: text
            aligned = torch.is_tensor(v) and v.dim() == 2 and v.shape[1] == n and k != "input_ids"
            batch[k] = torch.cat([v, v.new_zeros(1, len(target))], 1) if aligned else v
        batch["input_ids"] = torch.cat([inputs["input_ids"], torch.tensor([target])], 1)
        batch["attention_mask"] = torch.ones_like(batch["input_ids"])
        batch["labels"] = torch.full_like(batch["input_ids"], -100)
        batch["labels"][0, n:] = torch.tensor(target)
        batches.append(batch)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    for i in range(steps):
        loss = model(**batches[i % len(batches)]).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()


@pytest.mark.slow
def test_a_model_fine_tuned_on_the_rows_acts_through_the_agent(run, tmp_path) -> None:
    from transformers import AutoModelForImageTextToText

    from devicerl.agents.vlm.load import load_processor  # AutoProcessor, without torchvision

    out = tmp_path / "chat"
    assert main(["export", str(run), "--format", "chat", "--out", str(out), "success=true",
                 "tasks=[synthetic/tap]"]) == 0  # fmt: skip
    stored = {t.episode_id: t for t in TrajectoryStore(run / "trajectories").read_all()}
    by_answer = {r["messages"][-1]["content"][0]["text"]: r for r in _rows(out)
                 if stored[r["episode_id"]].extras.get("by") == "oracle"}  # fmt: skip
    rows = list(by_answer.values())[:2]
    assert len(rows) == 2  # two screens, two different taps to learn
    base = build_tiny_vlm(tmp_path / "base", "qwen2_vl")
    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_pretrained(base)
    processor = load_processor(base)
    _sft(model, processor, rows, out, steps=120)
    model.save_pretrained(tmp_path / "tuned")
    processor.save_pretrained(tmp_path / "tuned")
    agent = VLMAgent.from_pretrained(tmp_path / "tuned", VLMConfig(max_new_tokens=32))
    for row in rows:
        obs = stored[row["episode_id"]].agent_observation(row["step"])
        (sample,) = agent.act([obs], greedy=True)
        taught = row["messages"][-1]["content"][0]["text"]
        assert sample.text == taught and sample.action == parse_action(taught)
        assert sample.action != Action.invalid(taught, "")
