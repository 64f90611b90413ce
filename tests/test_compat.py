"""What devicerl saved before the action vocabulary grew still reads and means the same.

The fixtures in ``tests/compat/`` were recorded (``python -m tests.compat.record``) at the
commit each names, before the long press, open-app, wait and answer types existed: action
records and AutoUI texts of every type, a trajectory store, and the committed agents under
``benchmarks/agents/`` acting on fixed synthetic screens.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from compat.record import AGENTS, FIXTURES, ROOT, STORE, agent_observations, scored_actions

from devicerl.actions import Action, format_autoui, parse_autoui
from devicerl.data.store import TrajectoryStore

#: Log-probs may move this much: float32 sums differ between CPUs (up to 3e-5 seen between two
#: machines of this kind on log-probs of 30-50); a change in what an agent computes moves more.
LOG_PROB_TOLERANCE = 1e-4


def _fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("row", _fixture("actions")["actions"], ids=lambda r: r["describe"][:30])
def test_old_action_records_parse_to_the_same_action_and_bytes(row: dict[str, str]) -> None:
    action = Action.from_json(row["json"])
    assert action.to_json() == row["json"]  # re-serialised byte for byte
    assert action.describe() == row["describe"]
    assert format_autoui(action) == row["autoui"]
    assert format_autoui(action, precision=3) == row["autoui_3"]
    if not action.is_invalid:  # an invalid action is written back as its raw text
        assert parse_autoui(row["autoui"]) == action


def test_an_old_store_reads_the_same(tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(STORE, store)  # reading must not need to write, but keep the fixture safe
    read = sorted(TrajectoryStore(store), key=lambda t: t.task)
    expected = _fixture("store")["episodes"]
    assert len(read) == len(expected) == 2
    for t, e in zip(read, expected):
        assert (t.episode_id, t.task, t.instruction, t.seed) == (
            e["episode_id"], e["task"], e["instruction"], e["seed"]
        )  # fmt: skip
        assert (t.end_reason.value, t.success) == (e["end_reason"], e["success"])
        assert [s.action.to_json() for s in t.steps] == e["actions"]
        assert [s.reward for s in t.steps] == e["rewards"]
        assert [s.terminated for s in t.steps] == e["terminated"]
        assert [s.info for s in t.steps] == e["infos"]
        screens = [s.observation for s in t.steps] + [t.final_observation]
        digests = [hashlib.sha256(o.screenshot.tobytes()).hexdigest() for o in screens]
        assert digests == e["screens"]
        assert t.answer is None  # no answer in an old episode
    kinds = {s.action.type.value for t in read for s in t.steps}
    assert len(kinds) == 8  # AitW's seven and INVALID: every type an old store could hold


@pytest.mark.parametrize("name", AGENTS)
def test_committed_agents_act_and_score_as_before(name: str) -> None:
    from devicerl.agents.small import SmallAgent

    torch.set_num_threads(1)
    recorded = _fixture("agents")["agents"][name]
    agent = SmallAgent.from_pretrained(ROOT / "benchmarks" / "agents" / name)
    observations = agent_observations()
    greedy = agent.act(observations, greedy=True)
    assert len(recorded) == len(observations)
    for obs, sample, row in zip(observations, greedy, recorded):
        assert sample.action.to_json() == row["greedy"]
        assert sample.log_prob == pytest.approx(row["greedy_log_prob"], abs=LOG_PROB_TOLERANCE)
        actions = scored_actions(obs)
        assert [a.to_json() for a in actions] == row["actions"]
        with torch.no_grad():
            lp = agent.log_prob([obs] * len(actions), actions).tolist()
            raw = agent.log_prob([obs] * len(actions), actions, floor=False).tolist()
        assert lp == pytest.approx(row["log_probs"], abs=LOG_PROB_TOLERANCE)
        assert raw == pytest.approx(row["log_probs_no_floor"], abs=LOG_PROB_TOLERANCE)
