"""benchmarks/miniwob_suite.py without a browser: the Table 3 list and its mapping onto our
package, which tasks are out of the agent's reach, the published table's parser, and the
per-task table and RESULT line from a fake result."""

from __future__ import annotations

import csv
from pathlib import Path

import miniwob_suite as ms  # benchmarks/ (see conftest.py)
import pytest

from devicerl.agents.capabilities import ActionKind
from devicerl.agents.small.config import SmallAgentConfig, SmallAgentOptions
from devicerl.agents.small.parts import small_agent_kinds
from devicerl.config import load_config
from devicerl.errors import ConfigError
from devicerl.tasks import resolve

OURS = [t.name for t in resolve("miniwob")]


def test_every_table3_task_maps_to_a_task_of_our_package() -> None:
    assert len(ms.TABLE3_TASKS) == 104 and len(set(ms.TABLE3_TASKS)) == 104
    mapped = [ms.package_task(t) for t in ms.TABLE3_TASKS]
    assert len(set(mapped)) == 104  # no two Table 3 tasks land on one of ours
    assert set(mapped) <= set(OURS), sorted(set(mapped) - set(OURS))
    for table3, ours in ms.PACKAGE_NAMES.items():  # only names that really differ are mapped
        assert table3 in ms.TABLE3_TASKS and f"miniwob/{table3}" not in OURS
        assert ours not in ms.TABLE3_TASKS
    assert ms.package_task("drag-item") == "miniwob/drag-circle"
    with pytest.raises(ConfigError, match="'drag-circle' is not a task of Synapse's Table 3"):
        ms.package_task("drag-circle")


def test_out_of_reach_tasks_are_listed_with_the_reason() -> None:
    everything = ms.coverage(ms.TABLE3_TASKS, set(ActionKind), OURS)
    assert {t: why for t, why in everything.items() if why}.keys() == {"chase-circle"}
    assert "outside the AitW action space" in everything["chase-circle"]
    # the benchmark's own agent (tuned setup + HEADS) reaches all but chase-circle
    overrides = [h.removeprefix("agent.small.") for h in ms.HEADS if h.startswith("agent.small.")]
    heads = small_agent_kinds(load_config(SmallAgentOptions, None, overrides).architecture())
    assert [t for t, why in ms.coverage(ms.TABLE3_TASKS, heads, OURS).items() if why] == [
        "chase-circle"
    ]
    default = ms.coverage(ms.TABLE3_TASKS, small_agent_kinds(SmallAgentConfig()), OURS)
    assert default["drag-box"] == "the agent lacks drag"
    assert default["click-color"] == "the agent lacks pixels"
    assert default["click-test"] == ""
    gone = ms.coverage(["click-test"], set(ActionKind), [n for n in OURS if "click-test" not in n])
    assert gone["click-test"] == "miniwob/click-test is not in our MiniWoB++ package"


def _write_table(path: Path, rows: dict[str, list[str]], header: list[str] | None = None) -> Path:
    header = header or ["task", "Synapse", *ms.COLUMNS]
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for task, values in rows.items():
            w.writerow([task, *values])
    return path


def _fake_rows() -> dict[str, list[str]]:
    # Synapse, Human, CC-Net, CC-Net(BC), WebN-T5, Others
    return {t: ["n/a", "0.90", "0.95", "0.30", "n/a", "0.50"] for t in ms.TABLE3_TASKS}


def test_published_table_is_parsed_and_bad_rows_are_named(tmp_path) -> None:
    rows = _fake_rows()
    rows["terminal"] = ["1.00", "0.88", "-0.01", "0.00", "n/a", "0.00"]
    table = ms.read_published(_write_table(tmp_path / "t.csv", rows))
    assert len(table) == 104
    assert table["terminal"] == {
        "Human": 0.88,
        "CC-Net": -0.01,
        "CC-Net(BC)": 0.0,
        "WebN-T5": None,
        "Others": 0.0,
    }
    bad = dict(rows, **{"click-test": ["n/a", "0.9", "high", "0", "0", "0"]})
    with pytest.raises(ConfigError, match=r"b.csv:\d+ column CC-Net: 'high' is not a score"):
        ms.read_published(_write_table(tmp_path / "b.csv", bad))
    with pytest.raises(ConfigError, match=r"header lacks column.*WebN-T5"):
        ms.read_published(_write_table(tmp_path / "h.csv", {}, ["task", "Human"]))
    with pytest.raises(ConfigError, match="'click-nothing' is not a task"):
        ms.read_published(
            _write_table(tmp_path / "u.csv", {**rows, "click-nothing": rows["click-test"]})
        )
    short = {t: v for t, v in rows.items() if t != "use-spinner"}
    with pytest.raises(ConfigError, match=r"no row for 1 task.*'use-spinner'"):
        ms.read_published(_write_table(tmp_path / "s.csv", short))
    with pytest.raises(ConfigError, match=r"missing\.csv not found"):
        ms.read_published(tmp_path / "missing.csv")


def test_the_shared_published_table_gives_the_papers_means() -> None:
    path = ms.default_published()
    if not path.is_file():
        pytest.skip(f"the published table is not on this machine ({path})")
    rows = ms.suite_rows(ms.TABLE3_TASKS, {}, {}, ms.read_published(path), {})
    cols = ms.summarise(rows)["columns"]
    assert round(cols["Human"]["mean_all"], 3) == 0.935  # Synapse / CC-Net: human 0.935
    assert round(cols["CC-Net(BC)"]["mean_all"], 3) == 0.305
    assert round(cols["Others"]["mean_reported"], 3) == 0.646  # best pre-2022, 88 tasks
    assert cols["Others"]["reported"] == 88


def test_table_and_result_line_from_a_fake_result(tmp_path) -> None:
    published = ms.read_published(_write_table(tmp_path / "t.csv", _fake_rows()))
    tasks = ["click-test", "drag-item", "chase-circle", "enter-text"]
    per_task = {"miniwob/click-test": 1.0, "miniwob/drag-circle": 0.5}
    excluded = {"chase-circle": "outside the AitW action space: hover"}
    rows = ms.suite_rows(tasks, per_task, {"miniwob/click-test": 20}, published, excluded)
    assert [r["ours"] for r in rows] == [1.0, 0.5, 0.0, 0.0]
    assert rows[3]["excluded"].startswith("not evaluated")  # no eval episode: counts 0 too
    summary = ms.summarise(rows)
    assert summary["suite_mean"] == pytest.approx(1.5 / 4)
    assert summary["tasks_at_human"] == 1  # click-test: 1.0 >= 0.90
    assert summary["excluded"] == 2
    # click-test and enter-text are development tasks: the held-out mean is the other two's
    assert summary["tasks_outside_dev16"] == 2
    assert summary["mean_outside_dev16"] == pytest.approx(0.5 / 2)
    assert summary["columns"]["WebN-T5"] == {"mean_all": 0.0, "mean_reported": None, "reported": 0}
    text = ms.format_table(rows, summary)
    lines = text.splitlines()
    assert lines[0].startswith("| task | ours | n | Human | CC-Net | CC-Net(BC) | WebN-T5 |")
    assert "| click-test | 1.00 | 20 | 0.90 | 0.95 | 0.30 | n/a | 0.50 |" in lines
    assert "| drag-item (miniwob/drag-circle) | 0.50 | 0 |" in text
    assert "| chase-circle | 0.00 * | 0 |" in text
    assert "| **mean** | **0.375** |" in text
    assert "  chase-circle: outside the AitW action space: hover" in lines
    assert "mean over the 2 tasks outside miniwob-dev16 (the development split): 0.250" in text
    assert ms.result_line(summary, 1234, 3) == (
        "RESULT suite_mean=0.375 tasks_at_human=1 tasks=4 env_steps=1234 seeds=1 test_evals=3"
    )
    png = ms.plot(rows, tmp_path / "suite.png", "fake")
    assert png.stat().st_size > 5_000


def test_the_table_shows_each_tasks_training_successes(tmp_path) -> None:
    from devicerl.data.store import TrajectoryWriter
    from devicerl.records import EndReason, Trajectory

    ct, dc = "miniwob/click-test", "miniwob/drag-circle"
    ends = [(ct, EndReason.SUCCESS), (ct, EndReason.FAILURE), (ct, EndReason.TRUNCATED),
            (dc, EndReason.MAX_STEPS)]  # fmt: skip
    with TrajectoryWriter(tmp_path / "trajectories") as w:
        for task, end in ends:
            w.append(Trajectory(task=task, instruction="i", end_reason=end,
                                success=end is EndReason.SUCCESS))  # fmt: skip
    trained = ms.training_counts(tmp_path / "trajectories")
    assert trained == {ct: (1, 2), dc: (0, 1)}  # the truncated episode left out
    assert ms.training_counts(tmp_path / "absent") == {}
    published = ms.read_published(_write_table(tmp_path / "t.csv", _fake_rows()))
    tasks = ["click-test", "drag-item", "enter-text"]
    rows = ms.suite_rows(tasks, {"miniwob/click-test": 1.0}, {}, published, {}, trained)
    assert [r["train"] for r in rows] == [[1, 2], [0, 1], [0, 0]]
    lines = ms.format_table(rows, ms.summarise(rows)).splitlines()
    assert lines[0].endswith("| best pre-2022 | train |")
    assert lines[2].startswith("| click-test | 1.00 |") and lines[2].endswith("| 1/2 |")
    assert lines[3].endswith("| 0/1 |") and lines[4].endswith("| 0/0 |")
    untrained = ms.suite_rows(tasks, {}, {}, published, {})  # the untrained agent: no column
    assert "train" not in ms.format_table(untrained, ms.summarise(untrained)).splitlines()[0]


@pytest.mark.parametrize("algorithm", list(ms.ALGORITHMS))
def test_the_run_trains_with_the_chosen_algorithm_from_its_own_setup(algorithm) -> None:
    import argparse

    grown = argparse.Namespace(algorithm=algorithm, seed=1, eval_episodes=20, untrained=False,
                               overrides=["agent.init_from=some/agent"])  # fmt: skip
    cfg = ms._config(grown, ["miniwob/click-test", "miniwob/enter-text"], 500, [])
    assert (cfg.algo, cfg.mode, cfg.env_steps, cfg.seed) == (algorithm, "online", 500, 1)
    assert cfg.agent.init_from == "some/agent" and cfg.agent.path is None
    assert "page_text" in cfg.agent.small.heads and cfg.eval.split == "test"
    # the pretrained setup of that algorithm: Filtered BC keeps its own selection steps
    assert bool(cfg.filtered_bc.selection) and cfg.actor.loss_floor is False
    untrained = argparse.Namespace(**{**vars(grown), "untrained": True})
    assert ms._config(untrained, ["miniwob/click-test"], 500, []).mode == "eval"
