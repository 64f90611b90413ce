"""Applying verdicts and the asynchronous judging stage."""

import time

from judge_helpers import by_instruction, chat_config, collect, query, verdict_text

from devicerl.actions import Action
from devicerl.data.store import TrajectoryStore, TrajectoryWriter
from devicerl.judges import (
    Judge,
    JudgeConfig,
    JudgeRunner,
    Label,
    NativeJudge,
    Verdict,
    VLMJudgeConfig,
    apply_verdict,
    is_labelled,
    judge_trajectory,
    make_runner,
)
from devicerl.judges.vlm import VLMJudge
from devicerl.records import EndReason
from devicerl.testing.chat_server import Reply, ScriptedChatServer


def _steps(n: int, length: int = 5, seed: int = 0):
    """Episodes of exactly ``length`` steps on synthetic/steps (success is a coin flip)."""
    return collect(
        n,
        task="synthetic/steps",
        seed=seed,
        min_len=length,
        max_len=length,
        policy=lambda obs, rng: Action.tap(0.5, 0.5),
    )


def test_apply_success_failure_unknown() -> None:
    t = _steps(1)[0]
    assert is_labelled(t)  # never judged: the device's labels stand
    native = (t.success, t.end_reason, [s.reward for s in t.steps])
    apply_verdict(t, Verdict.unknown("api down"))
    assert (t.success, t.end_reason, [s.reward for s in t.steps]) == native
    assert t.judgement.verdict["label"] == "unknown"

    t = _steps(1)[0]
    apply_verdict(t, Verdict.of(False, step=4))
    assert not t.success and t.total_reward == 0.0
    assert t.end_reason in (EndReason.FAILURE, EndReason.MAX_STEPS)
    assert t.judgement.native_success == native[0]

    t = _steps(1)[0]
    after = t.steps[3].observation
    apply_verdict(t, Verdict.of(True, step=2))
    assert t.length == 3 and t.judgement.cut_steps == 2
    assert [s.reward for s in t.steps] == [0.0, 0.0, 1.0] and t.steps[2].terminated
    assert t.success and t.end_reason is EndReason.SUCCESS
    assert t.final_observation is after  # the screen the judge saw as solved


def test_per_step_judging_cuts_at_the_first_success(tmp_path) -> None:
    trajs = _steps(3, length=6, seed=1)
    # the judge says "solved" once two actions have been taken
    with ScriptedChatServer(lambda b: verdict_text(query(b)[1] >= 2)) as srv:
        judge = VLMJudge(
            chat_config(srv.base_url), VLMJudgeConfig(cache_path=str(tmp_path / "c.sqlite"))
        )
        runner = JudgeRunner(judge, per_step=True, workers=2)
        for t in trajs:
            runner.submit(t)
        out = runner.drain(timeout=30)
        runner.close()
        assert len(out) == 3 and runner.stats.steps_cut == 12
        for j in out:
            t = j.trajectory
            assert j.usable and j.verdict.step == 1 and t.length == 2
            assert [s.reward for s in t.steps] == [0.0, 1.0] and t.end_reason is EndReason.SUCCESS
            assert t.steps[0].verdict["label"] == "failure"
            assert t.steps[1].verdict["label"] == "success"
        assert len(srv.requests) == 6  # judging stopped at the success
        judge.close()
    with TrajectoryWriter(tmp_path / "store") as w:  # verdicts and cuts survive the store
        w.extend(j.trajectory for j in out)
    for t in TrajectoryStore(tmp_path / "store"):
        assert t.length == 2 and t.success and t.judgement.cut_steps == 4
        assert t.judgement.verdict["label"] == "success" and t.judgement.verdict["step"] == 1
        assert t.steps[1].verdict["rationale"] == "scripted." and is_labelled(t)


def test_unknown_is_dropped_never_a_silent_failure(tmp_path) -> None:
    trajs = collect(6, seed=2)
    native = {t.episode_id: (t.success, t.end_reason) for t in trajs}
    assert any(s for s, _ in native.values())
    cfg = JudgeConfig(kind="vlm", vlm=VLMJudgeConfig(cache_path=str(tmp_path / "c.sqlite")))
    with ScriptedChatServer(lambda b: Reply("no idea")) as srv:
        cfg.chat = chat_config(srv.base_url, max_concurrency=3)
        runner = make_runner(cfg)
        for t in trajs:
            runner.submit(t)
        out = runner.drain(timeout=30)
        runner.judge.close()
    assert runner.stats.unknown == 6 and runner.stats.dropped == 6 and len(out) == 6
    assert runner.stats.success == runner.stats.failure == 0
    for j in out:
        t = j.trajectory
        assert (t.success, t.end_reason) == native[t.episode_id]  # untouched
        assert not j.usable and j.verdict.is_unknown and not is_labelled(t)
        assert "unparseable" in t.judgement.verdict["reason"]


def test_truncated_episodes_are_not_judged_and_a_raising_judge_does_not_stop_the_stage() -> None:
    class Flaky(Judge):
        name = "flaky"

        def _judge_step(self, trajectory, index):
            if "boom" in trajectory.instruction:
                raise RuntimeError("bug in judge")
            return Verdict.of(True)

    trajs = collect(3, seed=3)
    trajs[0].end(EndReason.TRUNCATED, cause="device crashed")
    trajs[1].instruction = "boom"
    v = judge_trajectory(Flaky(), trajs[0])
    assert v.is_unknown and "not judged" in v.reason
    with JudgeRunner(Flaky(), workers=2) as runner:
        for t in trajs:
            runner.submit(t)
        out = {j.trajectory.episode_id: j for j in runner.drain(timeout=10)}
    assert not out[trajs[0].episode_id].usable
    assert trajs[0].end_reason is EndReason.TRUNCATED
    bad = out[trajs[1].episode_id]
    assert not bad.usable and "RuntimeError: bug in judge" in bad.verdict.reason
    assert out[trajs[2].episode_id].verdict.label is Label.SUCCESS


def test_a_slow_judge_does_not_slow_the_producer(tmp_path) -> None:
    """Devices keep producing while every verdict takes 1 s (judging lags, devices do not)."""
    n, delay, workers = 8, 1.0, 2
    labels = {}

    def slow(body):
        time.sleep(delay)
        return by_instruction(labels)(body)

    with ScriptedChatServer(slow) as srv:
        judge = VLMJudge(
            chat_config(srv.base_url, max_concurrency=workers),
            VLMJudgeConfig(cache_path=str(tmp_path / "c.sqlite")),
        )
        runner = JudgeRunner(judge, workers=workers)
        submit_s = []
        t0 = time.perf_counter()
        for i in range(n):  # the producer: one real episode at a time, handed off when done
            t = collect(1, seed=100 + i)[0]
            labels[t.instruction] = t.success
            s0 = time.perf_counter()
            runner.submit(t)
            submit_s.append(time.perf_counter() - s0)
        produce_s = time.perf_counter() - t0
        out = runner.drain(timeout=60)
        judged_s = time.perf_counter() - t0
        runner.close()
        judge.close()
    # a submit that waited for a verdict would take >= 1 s; judging all takes >= n/workers s
    assert max(submit_s) < 0.1
    assert judged_s >= n * delay / workers and produce_s < judged_s / 2
    assert len(out) == n and all(j.usable for j in out)
    assert all(j.verdict.success == j.trajectory.judgement.native_success for j in out)


def test_native_runner_relabels_nothing() -> None:
    trajs = collect(5, seed=4)
    before = [(t.success, t.end_reason, t.total_reward) for t in trajs]
    with JudgeRunner(NativeJudge(), workers=1) as runner:
        for t in trajs:
            runner.submit(t)
        out = runner.drain(timeout=10)
    assert sorted((j.trajectory.success, j.trajectory.end_reason, j.trajectory.total_reward)
                  for j in out) == sorted(before)  # fmt: skip
    assert runner.stats.success + runner.stats.failure == 5
