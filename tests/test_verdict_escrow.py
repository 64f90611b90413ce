"""Episodes shipped before their verdict: the labels that follow rebuild the judged episode.

A rollout group ships a finished episode unjudged (`detached` copy), then only the labels its
judge set (`Relabel`). Real synthetic episodes, a real VLM judge over the scripted chat server:
the unjudged copy relabelled on the learner's side must equal the episode the group judged, for
per-step judging that cuts the episode, whole-episode failures and unknown verdicts.
"""

from __future__ import annotations

import numpy as np
import pytest
from judge_helpers import chat_config, collect, query, verdict_text

from devicerl.judges import JudgeConfig, make_runner
from devicerl.judges.apply import is_labelled
from devicerl.records import EndReason, Trajectory
from devicerl.runtime.cluster.verdicts import Relabel, detached, unlabelled
from devicerl.testing.chat_server import Reply, ScriptedChatServer


def _same(a: Trajectory, b: Trajectory) -> None:
    assert a.episode_id == b.episode_id and len(a.steps) == len(b.steps)
    for x, y in zip(a.steps, b.steps):
        assert (x.reward, x.terminated, x.truncated, x.verdict) == (
            y.reward,
            y.terminated,
            y.truncated,
            y.verdict,
        )
        assert x.observation.step == y.observation.step
        assert np.array_equal(x.observation.screenshot, y.observation.screenshot)
    assert (a.end_reason, a.success, a.truncation_cause) == (
        b.end_reason,
        b.success,
        b.truncation_cause,
    )
    assert (a.extras, a.judgement) == (b.extras, b.judgement)
    assert a.final_observation.step == b.final_observation.step
    assert np.array_equal(a.final_observation.screenshot, b.final_observation.screenshot)


def _judge(respond, per_step: bool, episodes: list[Trajectory]) -> list[Trajectory]:
    with ScriptedChatServer(respond) as srv:
        cfg = JudgeConfig(kind="vlm", per_step=per_step, chat=chat_config(srv.base_url))
        cfg.vlm.cache_path = ""  # every verdict from the server, none from an earlier run
        with make_runner(cfg) as runner:
            for t in episodes:
                runner.submit(t)
            judged = [j.trajectory for j in runner.drain(timeout=60)]
    assert len(judged) == len(episodes)
    return judged


@pytest.mark.parametrize("per_step", [True, False])
def test_labels_rebuild_the_judged_episode_from_its_unjudged_copy(per_step: bool) -> None:
    """Per step: success on the second step of episodes of 4-6 steps, so each is cut there;
    whole episodes: success for 4 steps, failure for 5, a reply the judge cannot parse for 6."""
    episodes = collect(9, task="synthetic/steps", min_len=4, max_len=6)
    copies = {t.episode_id: detached(t) for t in episodes}

    def respond(body: dict) -> Reply:
        n_actions = query(body)[1]
        if per_step:
            return Reply(verdict_text(n_actions == 2))
        return Reply("no idea") if n_actions == 6 else Reply(verdict_text(n_actions == 4))

    judged = _judge(respond, per_step, episodes)
    for t in judged:
        copy = copies[t.episode_id]
        assert copy.judgement is None  # judging the episode left its copy alone
        assert len(copy.steps) >= 4 and copy.steps[1].verdict is None
        _same(Relabel.of(t).apply(copy), t)
    if per_step:
        assert all(t.success and len(t.steps) == 2 for t in judged)
        assert all(t.judgement.cut_steps >= 2 for t in judged)
    else:
        labels = [t.judgement.verdict["label"] for t in judged]
        assert sorted(set(labels)) == ["failure", "success", "unknown"]


def test_labels_of_another_episode_are_refused() -> None:
    a, b = collect(2, task="synthetic/steps", min_len=2, max_len=3)
    with pytest.raises(ValueError, match=f"labels of episode {a.episode_id}"):
        Relabel.of(a).apply(b)


def test_unlabelled_says_why_and_stays_out_of_training() -> None:
    (t,) = collect(1, task="synthetic/steps", min_len=2, max_len=3)
    native = (t.end_reason, t.success)
    out = unlabelled(t, "its node was lost")
    assert not is_labelled(out)
    assert out.judgement.verdict["reason"] == "its node was lost"
    assert (out.end_reason, out.success) == native
    assert out.end_reason is not EndReason.TRUNCATED
