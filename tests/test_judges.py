"""Native and VLM judges: verdicts, parsing, few-shot, cache, faults, rate limit, config."""

import multiprocessing as mp
import threading

import numpy as np
import pytest
import yaml
from judge_helpers import by_instruction, chat_config, collect, query, verdict_text
from PIL import Image

from devicerl.clients.chat import ChatAuthError
from devicerl.codecs import MobileUse
from devicerl.config import load_config
from devicerl.errors import ConfigError, DataError
from devicerl.judges import JudgeConfig, Label, NativeJudge, Verdict, VLMJudgeConfig, make_judge
from devicerl.judges.cache import VerdictCache
from devicerl.judges.fewshot import load_examples
from devicerl.judges.prompt import parse_verdict
from devicerl.judges.vlm import LAST_SCREENS, VLMJudge
from devicerl.records import EndReason
from devicerl.testing.chat_server import Reply, ScriptedChatServer


def _vlm(srv, tmp_path, chat=None, **cfg) -> VLMJudge:
    cfg.setdefault("cache_path", str(tmp_path / "cache.sqlite"))
    return VLMJudge(chat_config(srv.base_url, **(chat or {})), VLMJudgeConfig(**cfg))


def test_verdict_fields_and_round_trip() -> None:
    v = Verdict.of(True, rationale="done", judge="x", step=2)
    assert v.success is True and v.reward == 1.0 and not v.is_unknown
    u = Verdict.unknown("api down")
    assert u.success is None and u.reward is None and u.reason == "api down"
    assert Verdict.from_dict(v.to_dict()) == v and Verdict.from_dict(u.to_dict()) == u
    assert Verdict.of(False).reward == 0.0


def test_native_judge_reads_the_device_check() -> None:
    trajs = collect(12, skill=0.5, seed=1)
    assert {t.success for t in trajs} == {True, False}
    judge = NativeJudge()
    for t in trajs:
        v = judge.judge(t)
        assert v.success == t.success and v.judge == "native" and v.step == t.length - 1
        assert judge.judge_step(t, 0).success == t.steps[0].info["success"]
    t = trajs[0]
    t.end(EndReason.TRUNCATED, cause="device crashed")
    assert judge.judge(t).is_unknown and "device crashed" in judge.judge(t).reason
    with pytest.raises(IndexError):
        judge.judge_step(t, 5)


@pytest.mark.parametrize(
    "text, label",
    [
        ("Rationale: the app is open.\nVerdict: SUCCESS", Label.SUCCESS),
        ("Rationale: nothing happened.\nVerdict: FAILURE", Label.FAILURE),
        ("**Verdict:** failure", Label.FAILURE),
        ("Status: success", Label.SUCCESS),
        ("Answer: not completed", Label.FAILURE),
        ("Verdict: the task was not completed", Label.FAILURE),
        ("Verdict: The agent completed the task.", Label.SUCCESS),
        ('```json\n{"rationale": "ok", "success": true}\n```', Label.SUCCESS),
        ('{"verdict": "FAILURE", "reason": "wrong page"}', Label.FAILURE),
        ("Yes.", Label.SUCCESS),
        ("no idea", Label.UNKNOWN),
        ("I must reply with Verdict: SUCCESS or FAILURE.\nVerdict: FAILURE", Label.FAILURE),
        ("Verdict: SUCCESS or FAILURE", Label.UNKNOWN),
        ("The screen shows a list of news items about Chile.", Label.UNKNOWN),
        ("", Label.UNKNOWN),
    ],
)
def test_parse_verdict(text: str, label: Label) -> None:
    got, rationale, reason = parse_verdict(text)
    assert got is label
    assert bool(reason) == (label is Label.UNKNOWN)
    if "Rationale: the app" in text:
        assert rationale == "the app is open."


def test_vlm_request_has_task_actions_last_screens_and_verdict(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("JUDGE_KEY", "sk-judge")
    traj = collect(1, task="synthetic/steps", seed=3, min_len=5, max_len=5)[0]
    assert traj.length == 5
    with ScriptedChatServer(lambda b: verdict_text(True, "the list is shown")) as srv:
        judge = _vlm(srv, tmp_path, chat={"api_key_env": "JUDGE_KEY"})
        v = judge.judge(traj)
        assert v.label is Label.SUCCESS and v.rationale == "the list is shown."
        assert v.judge == "vlm" and v.step == 4 and not v.cached and v.latency_s > 0
        req = srv.requests[0]
        assert req.headers["Authorization"] == "Bearer sk-judge"
        assert req.body["model"] == "judge-model" and req.body["temperature"] == 0.0
        assert req.body["messages"][0]["role"] == "system"
        instruction, n_actions, n_images = query(req.body)
        assert instruction == traj.instruction and n_actions == 5 and n_images == LAST_SCREENS == 3
        # judging step 1 shows the two actions taken so far and the screens around them
        judge.judge_step(traj, 1)
        assert query(srv.requests[1].body)[1:] == (2, 3)
        judge.judge_step(traj, 0)
        assert query(srv.requests[2].body)[1:] == (1, 2)  # the first screen and the next
        judge.close()


def test_vlm_judge_lists_the_actions_in_its_models_own_language(tmp_path) -> None:
    """With a codec, a GUI model judging sees the actions as it writes them: Qwen2.5-VL's tool
    calls, in pixels of its server's resize of the screenshot."""
    traj = collect(1, task="synthetic/tap", seed=2)[0]
    step = traj.steps[0]
    assert step.action.is_tap
    with ScriptedChatServer(lambda b: verdict_text(True, "done")) as srv:
        cache = str(tmp_path / "cache.sqlite")  # never a verdict cached by an earlier run
        judge = VLMJudge(chat_config(srv.base_url), VLMJudgeConfig(cache_path=cache),
                         codec=MobileUse())  # fmt: skip
        judge.judge_step(traj, 0)
        text = srv.requests[0].body["messages"][-1]["content"][0]["text"]
        judge.close()
    shot = step.observation.screenshot
    size = MobileUse.served(shot.shape[1], shot.shape[0]).size
    x, y = (round(v * s) for v, s in zip(step.action.touch, size))
    assert f'{{"action": "click", "coordinate": [{x}, {y}]}}' in text
    assert step.action.describe() not in text


def test_vlm_survives_429_500_timeouts_garbage_with_bounded_retries(tmp_path) -> None:
    trajs = collect(3, seed=4)
    with ScriptedChatServer(by_instruction({t.instruction: t.success for t in trajs})) as srv:
        judge = _vlm(srv, tmp_path, chat={"timeout_s": 0.3})
        srv.push(
            Reply(status=429, headers={"Retry-After": "0"}),
            Reply(status=500),
            Reply(delay_s=0.8),
            Reply(garbage=True),
        )
        v = judge.judge(trajs[0])  # four faults, then the real answer
        assert v.success == trajs[0].success and len(srv.requests) == 5
        srv.push(*[Reply(status=503)] * 5)  # more faults than retries: unknown, no exception
        v = judge.judge(trajs[1])
        assert v.is_unknown and "gave up after 5 attempts" in v.reason
        assert len(srv.requests) == 10
        v = judge.judge(trajs[2])  # the run continues: the next call works
        assert v.success == trajs[2].success and len(srv.requests) == 11
        srv.push(Reply(status=400))  # refused: fails fast
        v = judge.judge(trajs[1])
        assert v.is_unknown and "HTTP 400" in v.reason and len(srv.requests) == 12
        srv.push(Reply(status=401))  # a refused key is no "unknown": it stops the run
        with pytest.raises(ChatAuthError, match="HTTP 401"):
            judge.judge(trajs[1])
        assert len(srv.requests) == 13
        judge.close()


def test_unparseable_reply_is_unknown_and_not_cached(tmp_path) -> None:
    traj = collect(1, seed=5)[0]
    with ScriptedChatServer(lambda b: Reply("hmm, hard to say")) as srv:
        judge = _vlm(srv, tmp_path)
        v = judge.judge(traj)
        assert v.is_unknown and "unparseable judge reply" in v.reason and "hard to say" in v.reason
        assert judge.judge(traj).is_unknown and len(srv.requests) == 2  # asked again
        judge.close()
    no_pixels = collect(1, seed=5, render=False)[0]
    with ScriptedChatServer() as srv:
        v = _vlm(srv, tmp_path).judge(no_pixels)
        assert v.is_unknown and "no screenshot after step 0" in v.reason and not srv.requests
        no_final = collect(1, seed=5)[0]
        no_final.final_observation = None  # only the screen before the last action is known
        v = _vlm(srv, tmp_path).judge(no_final)
        assert v.is_unknown and "no screenshot after" in v.reason and not srv.requests


def test_cache_hits_send_nothing_and_keys_are_per_call(tmp_path) -> None:
    trajs = collect(4, seed=6)
    with ScriptedChatServer(by_instruction({t.instruction: t.success for t in trajs})) as srv:
        judge = _vlm(srv, tmp_path)
        first = [judge.judge(t) for t in trajs]
        assert len(srv.requests) == 4 and not any(v.cached for v in first)
        again = [judge.judge(t) for t in trajs]
        assert len(srv.requests) == 4 and all(v.cached for v in again)
        assert [v.label for v in again] == [v.label for v in first]
        assert judge.stats.cache_hits == 4 and judge.stats.requests == 4
        judge.close()
        # persistent: a new judge (a new run) on the same cache file sends nothing
        judge = _vlm(srv, tmp_path)
        assert judge.judge(trajs[0]).cached and len(srv.requests) == 4
        # same screenshots, different task: a new question, not "seen before" (reference bug)
        trajs[0].instruction = "Tap the box labelled nowhere"
        assert not judge.judge(trajs[0]).cached and len(srv.requests) == 5
        judge.close()
        # another model is another key
        judge = _vlm(srv, tmp_path, chat={"model": "other"})
        assert not judge.judge(trajs[1]).cached and len(srv.requests) == 6
        judge.close()


def _writer(path: str, start: int) -> None:
    cache = VerdictCache(path)

    def put(lo: int) -> None:
        for i in range(lo, lo + 25):
            cache.put(f"k{i}", Label.SUCCESS if i % 2 else Label.FAILURE, f"r{i}", "m")

    threads = [threading.Thread(target=put, args=(start + 25 * j,)) for j in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cache.close()


def test_cache_is_safe_across_threads_and_processes(tmp_path) -> None:
    path = str(tmp_path / "shared.sqlite")
    VerdictCache(path).close()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, 50 * p)) for p in range(3)]
    for p in procs:
        p.start()
    _writer(path, 150)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    cache = VerdictCache(path)
    assert len(cache) == 200
    assert cache.get("k7") == (Label.SUCCESS, "r7") and cache.get("k8")[0] is Label.FAILURE
    assert cache.get("missing") is None
    cache.put("u", Label.UNKNOWN, "", "m")
    assert cache.get("u") is None
    cache.close()
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(DataError, match=r"bad\.sqlite"):
        VerdictCache(bad).get("x")


def test_rate_limit_holds_under_concurrent_judging(tmp_path) -> None:
    trajs = collect(8, seed=7)
    with ScriptedChatServer(by_instruction({t.instruction: t.success for t in trajs})) as srv:
        judge = _vlm(srv, tmp_path, chat={"requests_per_minute": 600, "max_concurrency": 4})
        threads = [threading.Thread(target=judge.judge, args=(t,)) for t in trajs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        times = sorted(r.at for r in srv.requests)
        assert len(times) == 8
        # 10 requests/s, burst 1: 8 requests span 0.7 s less the jitter (see test_chat_client);
        # the span, not each gap: a loaded machine may delay one receipt and bunch two
        span = times[-1] - times[0]
        assert span >= 0.6, np.diff(times)
        judge.close()


def _png(path, color) -> None:
    Image.fromarray(np.full((40, 20, 3), color, np.uint8)).save(path)


def test_few_shot_examples_from_manifest_and_folder(tmp_path) -> None:
    _png(tmp_path / "a.png", 10)
    _png(tmp_path / "b.png", 200)
    manifest = {
        "examples": [
            {"instruction": "Open settings", "images": ["a.png", "b.png"], "label": "success",
             "rationale": "Settings are open.", "actions": ["tap(0.5, 0.5)"]},
            {"instruction": "Search ebay", "images": "a.png", "label": False},
        ]
    }  # fmt: skip
    (tmp_path / "shots.yaml").write_text(yaml.safe_dump(manifest))
    examples = load_examples(tmp_path / "shots.yaml")
    assert [e.label for e in examples] == [Label.SUCCESS, Label.FAILURE]
    assert len(examples[0].images) == 2 and examples[0].images[1][0, 0, 0] == 200
    folder = tmp_path / "folder"
    for label in ("success", "failure"):
        (folder / label).mkdir(parents=True)
        _png(folder / label / "x.png", 50)
        (folder / label / "x.txt").write_text(f"task for {label}\n")
    examples = load_examples(folder)
    assert [(e.instruction, e.label) for e in examples] == [
        ("task for success", Label.SUCCESS),
        ("task for failure", Label.FAILURE),
    ]
    (folder / "failure" / "y.png").write_bytes(b"not a png")
    with pytest.raises(DataError, match=r"y\.png"):
        load_examples(folder)
    manifest["examples"][1]["label"] = "maybe"
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(manifest))
    with pytest.raises(DataError, match=r"bad.yaml, example 1: label"):
        load_examples(tmp_path / "bad.yaml")

    traj = collect(1, seed=8)[0]
    with ScriptedChatServer(lambda b: verdict_text(True)) as srv:
        judge = _vlm(srv, tmp_path, few_shot=str(tmp_path / "shots.yaml"))
        judge.judge(traj)
        messages = srv.requests[0].body["messages"]
        assert [m["role"] for m in messages] == ["system", "user", "assistant"] * 1 + [
            "user",
            "assistant",
            "user",
        ]
        assert "Open settings" in messages[1]["content"][0]["text"]
        assert messages[2]["content"].endswith("Verdict: SUCCESS")
        assert messages[4]["content"].endswith("Verdict: FAILURE")
        assert sum(p["type"] == "image_url" for p in messages[1]["content"]) == 2
        judge.close()
        # other examples, other cache key
        judge = _vlm(srv, tmp_path)
        assert not judge.judge(traj).cached
        judge.close()


def test_one_key_selects_the_judge(tmp_path) -> None:
    assert isinstance(make_judge(load_config(JudgeConfig)), NativeJudge)
    with pytest.raises(ConfigError, match=r"chat\.model"):
        make_judge(load_config(JudgeConfig, None, ["kind=vlm"]))
    with pytest.raises(ConfigError, match="kind"):
        load_config(JudgeConfig, None, ["kind=gemini"])
    with pytest.raises(ConfigError, match="unknown config key 'on_unknown'"):
        load_config(JudgeConfig, None, ["on_unknown=drop"])  # unknown verdicts are dropped
    cfg = load_config(
        JudgeConfig,
        None,
        ["kind=vlm", "chat.model=m", f"vlm.cache_path={tmp_path / 'c.sqlite'}"],
    )
    judge = make_judge(cfg)
    assert isinstance(judge, VLMJudge) and judge.config.cache_path == str(tmp_path / "c.sqlite")
    judge.close()
    with pytest.raises(ConfigError, match=r"unknown config key 'vlm\.last_k'"):
        load_config(JudgeConfig, None, ["vlm.last_k=2"])  # the last 3 screens: LAST_SCREENS
