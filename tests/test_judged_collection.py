"""A short collection on synthetic devices, judged by the VLM judge against a local server
(the judging stage after the collector, as a run has it)."""

from __future__ import annotations

import re

from judge_helpers import labelled as take_labelled
from judge_helpers import verdict_text

from devicerl.agents import RandomPolicy
from devicerl.config import load_config
from devicerl.envs import EnvSpec
from devicerl.judges import JudgeConfig, is_labelled
from devicerl.pool import EnvPool
from devicerl.records import EndReason
from devicerl.runtime.acting.collector import Collector
from devicerl.runtime.acting.episode_counts import EpisodeCounts
from devicerl.runtime.acting.judging import judge_each
from devicerl.tasks import Task, TaskSampler
from devicerl.testing.chat_server import Reply, ScriptedChatServer

TAP = [Task("synthetic/tap", max_steps=3, env="synthetic")]


def _word(instruction: str) -> str:
    return re.search(r"labelled (\w+)", instruction).group(1)


def _script(body: dict) -> Reply:
    """Success for even-length box labels, an unreadable reply for labels starting with a vowel."""
    text = body["messages"][-1]["content"][0]["text"]
    word = _word(re.search(r"^Task: (.*)$", text, re.M).group(1))
    if word[0] in "aeiou":
        return Reply("hmm")
    return Reply(verdict_text(len(word) % 2 == 0), delay_s=0.05)


def _pool() -> EnvPool:
    specs = [EnvSpec("synthetic/tap", {"step_latency": 0.002, "seed": i}) for i in range(3)]
    return EnvPool(specs, tasks=TaskSampler(TAP, seed=1), worker="subprocess")


def test_collection_with_the_vlm_judge_selected_by_one_key(tmp_path) -> None:
    with ScriptedChatServer(_script) as srv:
        config = load_config(
            JudgeConfig,
            None,
            [
                "kind=vlm",  # the one key; the rest says where the server is
                f"chat.base_url={srv.base_url}",
                "chat.model=judge-model",
                f"vlm.cache_path={tmp_path / 'cache.sqlite'}",
            ],
        )
        with _pool() as pool:
            episodes = Collector(pool, RandomPolicy(seed=0)).collect(None)
            out = take_labelled(judge_each(episodes, config), 10)
        sent = len(srv.requests)
    stats = EpisodeCounts()
    for t in out:
        stats.count(t)
    labelled = [t for t in out if is_labelled(t)]
    unlabelled = [t for t in out if not is_labelled(t)]
    assert len(labelled) == 10  # only labelled episodes count
    assert stats.episodes == 10 and stats.unlabelled == len(unlabelled)
    assert sent >= len(out)  # every yielded episode was judged (plus those still in flight)
    for t in labelled:
        assert t.success == (len(_word(t.instruction)) % 2 == 0)  # the judge's label, not native
        assert t.total_reward == float(t.success) and t.judgement.verdict["judge"] == "vlm"
        assert (t.end_reason is EndReason.SUCCESS) == t.success
        assert t.judgement is not None
    for t in unlabelled:  # the judge could not tell: native labels kept, not counted
        assert _word(t.instruction)[0] in "aeiou" and "unparseable" in t.judgement.verdict["reason"]
        assert t.success == t.judgement.native_success
    assert stats.successes == sum(t.success for t in labelled)


def test_native_judge_through_the_same_key_keeps_device_labels() -> None:
    config = load_config(JudgeConfig)  # kind=native (default): the device's labels stand
    with _pool() as pool:
        out = take_labelled(
            judge_each(Collector(pool, RandomPolicy(seed=0)).collect(None), config), 6
        )
    assert len(out) >= 6 and all(is_labelled(t) for t in out)
    assert all(t.judgement is None for t in out)  # no judge touched them
