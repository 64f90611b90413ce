"""Rule: no output inside an input. Every verb that writes refuses, in one line and before
writing, an output inside one of its inputs or holding one (links followed), and the inputs
stay as they were: interpolate, train / eval / collect (the agent's folders, offline data,
task files, the config file), import-digirl, view, judge-eval."""

from __future__ import annotations

import pytest
from _holes import SYN, cli, episodes, snapshot

from devicerl.agents.config import SmallAgentConfig
from devicerl.agents.small import SmallAgent
from devicerl.runtime.runs.folder import RunDir


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    path = tmp_path_factory.mktemp("agents") / "agent"
    SmallAgent(SmallAgentConfig(allowed_types=("DUAL_POINT", "TYPE"), d_model=32)).save(path)
    return path


@pytest.fixture()
def store_run(tmp_path):
    run = RunDir(tmp_path / "data").create()
    with run.writer() as w:
        w.extend(episodes(3, screenshots=False))
    return run.path


def test_interpolate_never_writes_an_agent_into_itself(agent, tmp_path, capsys) -> None:
    before = snapshot(agent)
    for out, where in ((agent / "mixed", "is inside"), (agent.parent, "holds")):
        r = cli(capsys, "interpolate", agent, agent, "--alpha", "0.5", "--out", out)
        line = r.one_line()
        assert f"--out {out} {where} START {agent}" in line
    link = tmp_path / "link"
    link.symlink_to(agent)
    r = cli(capsys, "interpolate", agent, link, "--alpha", "0.5", "--out", link / "mixed")
    assert "inside START" in r.one_line()
    assert snapshot(agent) == before


def test_a_run_is_never_written_into_what_it_reads(agent, store_run, tmp_path, capsys) -> None:
    before = snapshot(store_run), snapshot(agent)
    train = ["train", *SYN, "env_steps=4"]
    cases = [
        (["eval", *SYN, f"agent.path={agent}", "--out", agent / "eval"], "agent.path"),
        ([*train, f"agent.init_from={agent}", "--out", agent / "run"], "agent.init_from"),
        (
            [*train, "mode=offline", f"offline_data={store_run}", "--out", store_run / "x"],
            "offline_data",
        ),
        (  # --overwrite of the folder the offline data is in would delete it first
            [
                "train",
                *SYN,
                "mode=offline",
                f"offline_data={store_run}",
                "--overwrite",
                "--out",
                store_run.parent,
            ],
            "offline_data",
        ),
        (
            ["collect", *SYN, f"tasks.train={store_run}/t.txt", "--overwrite", "--out", store_run],
            "tasks.train",
        ),
    ]
    (store_run / "t.txt").write_text("tap the button\n")
    for argv, name in cases:
        r = cli(capsys, *argv)
        assert name in r.one_line() and "--out" in r.one_line(), argv
    (store_run / "t.txt").unlink()
    assert (snapshot(store_run), snapshot(agent)) == before


def test_the_config_file_is_an_input_too(tmp_path, capsys) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    config = folder / "setup.yaml"
    config.write_text("env: {name: synthetic, worker: serial, num_envs: 1}\n")
    r = cli(capsys, "train", "--config", config, *SYN, "--overwrite", "--out", folder)
    assert "--config" in r.one_line() and config.read_text().startswith("env:")


def test_view_judge_eval_and_import_keep_out_of_their_inputs(store_run, tmp_path, capsys):
    before = snapshot(store_run)
    r = cli(capsys, "view", store_run, "--out", store_run / "trajectories" / "report")
    assert "RUN_DIR's store" in r.one_line()
    r = cli(capsys, "judge-eval", store_run, "--json", store_run / "trajectories" / "j.json")
    assert "--json" in r.one_line() and "RUN_OR_DATA" in r.one_line()
    pt = tmp_path / "imports" / "data.pt"
    pt.parent.mkdir()
    pt.write_bytes(b"not read")
    r = cli(capsys, "import-digirl", pt, "--out", pt.parent)
    assert "holds FILE.pt" in r.one_line() and pt.read_bytes() == b"not read"
    assert snapshot(store_run) == before
    assert cli(capsys, "view", store_run).code == 0  # the default report folder is apart
