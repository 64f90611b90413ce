"""Judge evaluation: ground truth, the report and the ``devicerl judge-eval`` command."""

import json
import subprocess
import sys

import pytest
from judge_helpers import by_instruction, chat_config, collect

from devicerl.data.store import TrajectoryStore
from devicerl.judges import NativeJudge, VLMJudgeConfig
from devicerl.judges.evaluate import evaluate_judge, ground_truth
from devicerl.judges.vlm import VLMJudge
from devicerl.records import EndReason
from devicerl.runtime.runs.folder import RunDir
from devicerl.testing.chat_server import ScriptedChatServer


def _dataset(tmp_path, n=16):
    """Real synthetic episodes plus a VLM script that is wrong or unreadable on known ones.

    Returns the episodes, the script and the number of true successes / failures among the
    episodes with ground truth (the last one is truncated, so it has none).
    """
    trajs = collect(n, task="synthetic/type", skill=0.6, seed=11)
    trajs += collect(n, skill=0.5, seed=12)
    trajs[-1].end(EndReason.TRUNCATED, cause="crash")
    for i, t in enumerate(trajs):  # distinct tasks, so the script can answer per episode
        t.instruction = f"{t.instruction} (episode {i})"
    labels = {t.instruction: t.success for t in trajs}
    pos = [t for t in trajs[:-1] if t.success]
    neg = [t for t in trajs[:-1] if not t.success]
    assert len(pos) >= 3 and len(neg) >= 2
    labels[neg[0].instruction] = True  # one false positive
    labels[pos[0].instruction] = False  # one false negative
    labels[pos[1].instruction] = "garbage"  # one unknown
    with RunDir(tmp_path / "run").create().writer() as w:  # a run folder, as training writes
        w.extend(trajs)
    return trajs, labels, (len(pos), len(neg))


def test_ground_truth_prefers_a_human_label() -> None:
    t = collect(1, task="synthetic/type", skill=1.0, seed=1)[0]
    assert t.success and ground_truth(t) is True
    t.ground_truth = False
    assert ground_truth(t) is False
    t.ground_truth = None
    t.end(EndReason.TRUNCATED, cause="crash")
    assert ground_truth(t) is None


def test_evaluate_judge_confusion_matrix(tmp_path) -> None:
    trajs, labels, expect = _dataset(tmp_path)
    store = TrajectoryStore(tmp_path / "run" / "trajectories")
    loaded = list(store)
    assert len(loaded) == len(trajs)
    native = evaluate_judge(NativeJudge(), loaded)
    assert native.accuracy == 1.0 and native.no_truth == 1 and native.unknown == 0
    with ScriptedChatServer(by_instruction(labels)) as srv:
        judge = VLMJudge(
            chat_config(srv.base_url, max_concurrency=4),
            VLMJudgeConfig(cache_path=str(tmp_path / "c.sqlite")),
        )
        report = evaluate_judge(judge, store.iter_trajectories(), workers=4)
        judge.close()
    n_pos, n_neg = expect
    assert (report.tp, report.fn, report.unknown_pos) == (n_pos - 2, 1, 1)
    assert (report.fp, report.tn, report.unknown_neg) == (1, n_neg - 1, 0)
    assert report.no_truth == 1 and report.n == len(trajs) - 1
    assert report.accuracy == pytest.approx((n_pos + n_neg - 3) / (n_pos + n_neg - 1))
    assert report.false_positive_rate == pytest.approx(1 / n_neg)
    assert report.false_negative_rate == pytest.approx(1 / (n_pos - 1))
    assert len(report.mistakes) == 2 and "unparseable" in next(iter(report.unknown_reasons))
    assert len(srv.requests) == len(trajs) - 1  # the truncated episode was not sent
    text = report.format()
    assert "false-positive rate" in text and "unknown 1" in text


def test_judge_eval_cli_against_a_local_server(tmp_path) -> None:
    trajs, labels, _ = _dataset(tmp_path)
    cache = tmp_path / "cache.sqlite"
    (tmp_path / "run.yaml").write_text(f"kind: vlm\nvlm:\n  cache_path: {cache}\n")
    with ScriptedChatServer(by_instruction(labels)) as srv:
        cmd = [
            sys.executable, "-m", "devicerl", "judge-eval", str(tmp_path / "run"),
            "--config", str(tmp_path / "run.yaml"),
            "--set", f"chat.base_url={srv.base_url}", "chat.model=judge-model",
            "--json", str(tmp_path / "report.json"),
        ]  # fmt: skip
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        sent = len(srv.requests)
        r2 = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert r2.returncode == 0, r2.stderr
        assert len(srv.requests) == sent + 1  # re-judging is free (only the unknown is re-asked)
    report = json.loads((tmp_path / "report.json").read_text())
    assert (report["fp"], report["fn"], report["unknown"]) == (1, 1, 1)
    assert report["cached"] == len(trajs) - 2
    assert "judge: vlm" in r.stdout and "false-positive rate" in r.stdout
    r = subprocess.run(
        [sys.executable, "-m", "devicerl", "judge-eval", str(tmp_path / "run" / "trajectories")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "accuracy 100.0 %" in r.stdout and "judge: native" in r.stdout
    r = subprocess.run(
        [sys.executable, "-m", "devicerl", "judge-eval", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "nope: no stored episodes" in r.stderr
