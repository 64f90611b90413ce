"""A failing or slow endpoint never keeps a run alive (the rule, against the real chat server
answering 500 or not at all): the judge's queue is bounded, each episode's judging and each
episode's agent failures have a budget, and a run ends with its judging, saying how many
episodes went unlabelled and why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

from judge_helpers import chat_config, collect, verdict_text

from devicerl.agents.api import APIAgent, APIAgentConfig
from devicerl.clients import ChatClient, ChatConfig
from devicerl.envs import EnvSpec
from devicerl.judges import JudgeConfig, make_runner
from devicerl.pool import EnvPool
from devicerl.runtime.acting.collector import Collector
from devicerl.tasks import Task, TaskSampler
from devicerl.testing.chat_server import Reply, ScriptedChatServer


def _judge(base_url: str, **chat) -> JudgeConfig:
    cfg = JudgeConfig(kind="vlm", chat=chat_config(base_url, **chat))
    cfg.vlm.cache_path = ""  # every verdict from the server
    return cfg


def test_a_run_against_a_500_judge_sends_nothing_after_it_ends_and_says_why(tmp_path) -> None:
    """Before: finished episodes queued without bound and the process kept judging them after
    the run had written its summary (retries, backoff and all)."""
    with ScriptedChatServer(lambda body: Reply(status=500)) as srv:
        cmd = [
            sys.executable,
            "-m",
            "devicerl",
            "collect",
            "--out",
            str(tmp_path / "run"),
            "env.name=synthetic",
            "env.num_envs=2",
            "env.worker=serial",
            "tasks.train=synthetic/tap",
            "env_steps=40",
            "logging.tensorboard=false",
            "judge.kind=vlm",
            "judge.chat.model=judge-model",
            f"judge.chat.base_url={srv.base_url}",
            "judge.chat.timeout_s=0.5",  # each episode's budget: 5 attempts, 2.5 s
            "judge.vlm.cache_path=",
        ]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        try:
            assert proc.stdout is not None
            summary_line = proc.stdout.readline()  # collect prints its summary last
            ended = time.monotonic()
            rc = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        err = proc.stderr.read() if proc.stderr else ""
        late = [r for r in srv.requests if r.at > ended]
    assert rc == 0, err
    assert srv.requests and not late, f"{len(late)} judge requests after the run ended"
    summary = json.loads(summary_line)
    assert summary["unlabelled"] > 0 and summary["episodes"] == 0
    reasons = summary["unlabelled_reasons"]  # the end may leave some not judged at all
    assert reasons["judge API failed"] > 0 and set(reasons) <= {"judge API failed", "not judged"}
    assert sum(reasons.values()) == summary["unlabelled"]
    assert f"{summary['unlabelled']} episodes stored unlabelled" in err
    assert "judge API failed" in err


def test_the_judge_queue_is_bounded_the_producer_waits() -> None:
    """Before: `submit` never waited, so a judge that does not answer gathered every
    finished episode of the run."""
    gate = threading.Event()

    def held(body: dict) -> Reply:
        gate.wait(30)
        return Reply(verdict_text(True))

    episodes = collect(12, seed=1)
    with ScriptedChatServer(held) as srv:
        runner = make_runner(_judge(srv.base_url, max_concurrency=2))
        seen: list[int] = []

        def produce() -> None:
            for t in episodes:
                runner.submit(t)
                seen.append(runner.pending)

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        # two episodes per judging thread: both threads asking, two waiting, the queue full
        while len(srv.requests) < 2 or len(seen) < 4:
            assert producer.is_alive() or len(seen) == len(episodes)
            time.sleep(0.01)
        assert len(seen) == 4 and producer.is_alive()  # the fifth waits for room
        gate.set()
        producer.join(60)
        judged = runner.drain(timeout=60)
        runner.close()
    assert max(seen) <= 4 and len(judged) == len(episodes)
    assert all(j.usable and j.trajectory.success for j in judged)


def test_close_hands_back_every_episode_unlabelled_and_asks_nothing_more() -> None:
    """Before: `close` waited for the queued work (every retry of every episode)."""
    from devicerl.judges.runner import NOT_JUDGED, STILL_ANSWERING

    gate = threading.Event()

    def hanging(body: dict) -> Reply:
        gate.wait(30)
        return Reply(status=500)

    episodes = collect(5, seed=2)
    with ScriptedChatServer(hanging) as srv:
        runner = make_runner(_judge(srv.base_url, max_concurrency=2))
        for t in episodes:
            runner.submit(t, wait=False)
        while len(srv.requests) < 2:
            time.sleep(0.01)
        left = runner.close(grace_s=0.0)
        asked = len(srv.requests)
        gate.set()
        time.sleep(0.5)  # the server answers the two held requests: nobody retries them
        assert len(srv.requests) == asked == 2
    reasons = sorted(j.trajectory.judgement.verdict["reason"] for j in left)
    assert reasons == sorted([STILL_ANSWERING] * 2 + [NOT_JUDGED] * 3)
    assert {j.trajectory.episode_id for j in left} == {t.episode_id for t in episodes}
    assert not any(j.usable for j in left) and runner.stats.left_at_close == 5


def test_the_api_agents_failure_budget_is_per_episode_not_per_action() -> None:
    """Before: every action of an episode made its own retries against a dead endpoint (15 s
    per action with the default backoff); now an episode's actions share one budget."""
    tasks = [Task("synthetic/steps", max_steps=5, env="synthetic")]
    specs = [EnvSpec("synthetic/steps", {"render": False, "seed": i}) for i in range(2)]
    with ScriptedChatServer(lambda body: Reply(status=500)) as srv:
        chat = ChatConfig(base_url=srv.base_url, model="vlm")
        client = ChatClient(chat, max_retries=1, backoff_s=0.01)  # 2 attempts a request
        agent = APIAgent(APIAgentConfig(chat=chat), client)
        with EnvPool(specs, tasks=TaskSampler(tasks, seed=0), worker="serial") as pool:
            out = Collector(pool, agent).run(6)
        sent = len(srv.requests)
    steps = sum(t.length for t in out)
    assert steps > len(out) * 2  # episodes of several actions each
    started = len(out) + len(specs)  # at most one more episode per device was under way
    assert sent <= 2 * started  # one budget of 2 attempts per episode, not per action
    reasons = [s.action.reason for t in out for s in t.steps]
    assert all(s.action.is_invalid for t in out for s in t.steps)
    assert any("gave up after 2 attempts" in r for r in reasons)
    assert any(r.startswith("API not asked: failure budget of 2 attempts spent") for r in reasons)
