"""The web-skills pre-training suite on real headless Chromium: every page's oracle plan solves
it with actions the small agent can express, a wrong action fails, seeds fix the page, the
pages are served beside MiniWoB++'s core scripts, and the two pre-training commands of
docs/pretraining.md produce an agent that a later run starts from."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from itertools import pairwise

import pytest
import torch
from _runs import element_at

from devicerl.actions import Action, ActionType
from devicerl.agents.config import SmallAgentConfig
from devicerl.agents.scripted import PlanOracle, _plan_action
from devicerl.agents.small import UNREPRESENTABLE_LOG_PROB, SmallAgent
from devicerl.cli.main import main as cli
from devicerl.config import load_config
from devicerl.envs import make
from devicerl.errors import ConfigError
from devicerl.runtime.acting.rollout import rollout
from devicerl.runtime.setup.config import TrainConfig
from devicerl.tasks import resolve
from devicerl.tasks.miniwob import MiniWoBOptions, _Server
from devicerl.tasks.webskills import FAMILIES, REACH_FAMILIES, WebSkillsSuite

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def env():
    e = make("browser", screenshot=False)
    yield e
    e.close()


def test_the_suites_list_every_page():
    for suite, families in (("webskills", FAMILIES), ("webskills-reach", REACH_FAMILIES)):
        names = [t.name for t in resolve(suite)]
        assert names == [f"{suite}/{n}" for n in families]
        assert all(t.max_steps == families[t.short_name] for t in resolve(suite))


def test_every_plan_solves_its_page_with_actions_the_agent_expresses(env):
    agent = SmallAgent(
        SmallAgentConfig(allowed_types=(ActionType.DUAL_POINT, ActionType.TYPE), swipes=False)
    )
    for name in FAMILIES:
        for seed in (0, 1, 2):
            t = rollout(env, PlanOracle(), f"webskills/{name}", seed)
            assert t.success, (name, seed, t.instruction, [s.action for s in t.steps])
            assert t.length <= FAMILIES[name] - 1
            for s in t.steps:
                if s.action.type is ActionType.TYPE:
                    assert s.action.text in t.instruction
            seen = [t.agent_observation(i, s.observation) for i, s in enumerate(t.steps)]
            log_p = agent.log_prob(seen, [s.action for s in t.steps])
            assert bool((log_p > UNREPRESENTABLE_LOG_PROB / 2).all()), (name, seed, log_p)


def test_every_reach_plan_solves_its_page_with_actions_the_reach_agent_expresses_exactly():
    # the full-suite benchmark's agent: free points on its lattice, drags, page text, the
    # character decoder, Enter; pixels (the shapes carry no text)
    overrides = ["agent.small.heads=[swipes,points,page_text,free_text]"]
    overrides += ["agent.small.inputs=[pixels]"]
    overrides += ["agent.small.allowed_types=[DUAL_POINT,TYPE,PRESS_ENTER]"]
    agent = load_config(TrainConfig, None, overrides).agent.make()
    kinds: set[str] = set()
    env = make("browser", screenshot=True)
    try:
        for name, budget in REACH_FAMILIES.items():
            for seed in (0, 2):  # type-transformed's seed 2 submits with Enter
                t = rollout(env, PlanOracle(), f"webskills-reach/{name}", seed)
                assert t.success, (name, seed, t.instruction, [s.action for s in t.steps])
                assert t.length <= budget - 1
                seen = [t.agent_observation(i, s.observation) for i, s in enumerate(t.steps)]
                metas = agent.featurize(seen).meta
                for meta, s in zip(metas, t.steps, strict=True):
                    target = agent.action_target(meta, s.action)
                    assert target.exact, (name, seed, s.action, target.note)
                    a = s.action
                    kinds.add("drag" if a.is_swipe else a.type.value if not a.is_tap else "tap")
                    if a.type is ActionType.TYPE and a.text not in t.instruction:
                        kinds.add("text not in the instruction")
    finally:
        env.close()
    assert kinds == {"tap", "drag", "TYPE", "PRESS_ENTER", "text not in the instruction"}


def test_a_drop_outside_the_box_fails_and_a_tap_drags_nothing(env):
    obs = env.reset("webskills-reach/drag-onto", seed=3)
    x0, y0, x1, y1 = env.oracle()[0]["drag"]
    result = env.step(Action.swipe(*obs.to_normalised(x0, y0), *obs.to_normalised(x0, y0 + 10)))
    assert result.terminated and not result.info["success"]  # dropped beside where it was
    obs = env.reset("webskills-reach/drag-onto", seed=3)
    result = env.step(Action.tap(*obs.to_normalised(x0, y0)))  # a tap drags nothing
    assert not result.terminated
    result = env.step(Action.swipe(*obs.to_normalised(x0, y0), *obs.to_normalised(x1, y1)))
    assert result.terminated and result.info["success"]


def test_a_swipe_that_starts_on_a_link_scrolls_its_list(env):
    # a link is natively draggable on a desktop browser: before the phone-style swipe cancelled
    # that drag-and-drop, these swipes scrolled the list by their first 10 px only
    for seed in (37, 51):
        obs = env.reset("webskills-reach/scroll-find", seed=seed)
        x0, y0, _, _ = env.oracle()[0]["drag"]
        start = element_at(obs, *obs.to_normalised(x0, y0))
        assert start is not None and start.attrs.get("tag") == "a"
        t = rollout(env, PlanOracle(), "webskills-reach/scroll-find", seed)
        assert t.success and t.steps[0].action.is_swipe


def test_a_wrong_action_fails_and_the_agent_never_sees_the_plan(env):
    obs = env.reset("webskills/fill-form", seed=5)
    plan = env.oracle()
    assert plan[-1].get("tap") and any("type" in step for step in plan)
    button = next(e for e in obs.elements if e.attrs.get("id") == plan[-1]["tap"])
    result = env.step(Action.tap(*obs.to_normalised(*button.center)))  # submit an empty form
    assert result.terminated and not result.info["success"]
    # the plan is the device's (`DeviceEnv.oracle`), never part of what the agent observes
    assert "oracle_plan" not in obs.extras
    assert not any(isinstance(v, list) and v == plan for v in obs.extras.values())
    agent = SmallAgent(SmallAgentConfig())
    again = env.reset("webskills/fill-form", seed=5)
    assert env.oracle() == plan  # the same instance: the same plan
    seen, seen_again = agent.featurize([obs]), agent.featurize([again])
    for name in ("instr_ids", "instr_feats", "elem_ids", "elem_feats", "elem_role"):
        assert torch.equal(getattr(seen, name), getattr(seen_again, name)), name


def test_a_picked_option_other_than_the_asked_one_fails(env):
    # the plan taps the select, then the picker row (no id) by its text; here the first pick
    # taps another row of the same picker, and the rest of the plan is followed
    for seed in (0, 3):
        obs = env.reset("webskills/pick-option", seed=seed)
        plan = env.oracle()
        picks = [i for i, step in enumerate(plan) if "pick" in step]
        assert picks and all("tap" in plan[i - 1] for i in picks)
        result = None
        for i, step in enumerate(plan):
            if i == picks[0]:
                rows = [e for e in obs.elements if e.role == "option"]
                assert step["pick"] in [e.text for e in rows]
                wrong = next(e for e in rows if e.text != step["pick"])
                action = Action.tap(*obs.to_normalised(*wrong.center))
            else:
                action = _plan_action(obs, step)
            assert action.type is not ActionType.STATUS_TASK_IMPOSSIBLE, (seed, i, step)
            result = env.step(action)
            obs = result.observation
            if i == picks[0]:  # the picker closed, the select shows the tapped row
                assert not any(e.role == "option" for e in obs.elements)
                select = next(e for e in obs.elements if e.attrs.get("id") == plan[i - 1]["tap"])
                assert select.value == wrong.text
        assert result is not None and result.terminated and not result.info["success"]


def test_a_described_form_quotes_no_value_and_shuffles_its_boxes(env):
    mismatched = 0
    for seed in range(6):
        obs = env.reset("webskills/fill-described", seed=seed)
        plan = env.oracle()
        box_of = {b["type"]: a["tap"] for a, b in pairwise(plan) if "type" in b}
        assert 2 <= len(box_of) <= 4 and len(box_of) == sum(e.editable for e in obs.elements)
        for v in box_of:  # every value stands in the sentence, never between quotes
            assert v in obs.instruction and f'"{v}"' not in obs.instruction, (seed, v)
        top = {e.attrs.get("id"): e.bbox[1] for e in obs.elements}
        said = sorted(box_of, key=obs.instruction.index)
        mismatched += said != sorted(box_of, key=lambda v: top[box_of[v]])
    assert mismatched >= 2  # the sentence's order is not the boxes' order


def test_equal_seeds_give_equal_pages(env):
    first = env.reset("webskills/tick-boxes", seed=11)
    first_plan = env.oracle()
    again = env.reset("webskills/tick-boxes", seed=11)
    assert first_plan and env.oracle() == first_plan
    other = env.reset("webskills/tick-boxes", seed=12)
    assert first.instruction == again.instruction
    assert [e.text for e in first.elements] == [e.text for e in again.elements]
    assert (first.instruction, [e.text for e in first.elements]) != (
        other.instruction,
        [e.text for e in other.elements],
    )


def test_pages_are_served_beside_the_core_scripts_and_nothing_else():
    WebSkillsSuite()  # mounts the pages
    with pytest.raises(ConfigError, match="serve='http'"):
        WebSkillsSuite(MiniWoBOptions(serve="file"))
    base = _Server.acquire()
    try:
        for path in ("webskills/fill-form.html", "webskills/common.js", "core/core.js"):
            with urllib.request.urlopen(base + path, timeout=5) as r:
                assert r.status == 200
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(base + "webskills/../../../../etc/passwd", timeout=5)
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(base + "webskills/%2e%2e/%2e%2e/setup.py", timeout=5)
    finally:
        _Server.release()


def test_the_pretraining_commands_make_an_agent_a_run_starts_from(tmp_path, capsys):
    demos, pre = tmp_path / "demos", tmp_path / "pre"
    small = ["env.num_envs=1", "env.options.task_pages=1", "tasks.train=webskills/tap-element"]
    cfg = "webskills-pretrain"  # a shipped setup, by name
    assert cli(["collect", "--config", cfg, "--out", str(demos), "agent.kind=oracle",
                "agent.small={}", "env_steps=12", *small]) == 0  # fmt: skip
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["successes"] == summary["episodes"] > 0
    assert cli(["train", "--config", cfg, "--out", str(pre), f"offline_data={demos}",
                "offline_iterations=2", "actor.updates=2", "eval.n_tasks=1",
                "eval.episodes_per_task=1", *small]) == 0  # fmt: skip
    agent = SmallAgent.from_pretrained(pre / "agent")
    assert agent.version == 2
    assert agent.config.allowed_types == ("DUAL_POINT", "TYPE") and not agent.config.swipes
