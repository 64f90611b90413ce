"""League state on disk: a save/load round trip, and a real process killed with SIGKILL while
it trains and saves, resumed with its league intact."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from devicerl.errors import DataError
from devicerl.league.config import LeagueConfig, PBTConfig, SnapshotConfig
from devicerl.league.hparams import get_hparams
from devicerl.league.pbt import PBT
from devicerl.league.persist import load_league, save_league
from devicerl.league.state import Frozen, League, weights_hash
from devicerl.league.table import league_table
from tests.league_helpers import nudge, tiny_spec

ROOT = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _league() -> tuple[League, PBT]:
    config = LeagueConfig(
        generalist="gen",
        snapshot=SnapshotConfig(window=4),
        pbt=PBTConfig(policy="gen", population=2, interval=1),
    )
    league = League.build(
        {"gen": tiny_spec(learn_from=["clicks"]), "clicks": tiny_spec("click-*", seed=1)}, config
    )
    pbt = PBT(league, config.pbt)
    pbt.populate()
    return league, pbt


def test_save_load_round_trip_keeps_everything(tmp_path: Path) -> None:
    league, pbt = _league()
    for _ in range(4):
        league.record("clicks", "click-a", True)
        league.record("gen", "type-b", False)
        league.record("gen.pbt1", "type-b", True)
    league.end_iteration()  # snapshots clicks and gen.pbt1
    pbt.step()  # gen exploits gen.pbt1
    nudge(league["gen"].policy)
    [league.mapping.rng.random() for _ in range(3)]
    save_league(league, tmp_path, pbt)
    assert not list(tmp_path.glob("*.tmp"))
    assert "pickle" not in (tmp_path / "league.json").read_text()
    back, back_pbt = load_league(tmp_path)
    assert list(back.members) == list(league.members)
    for name, m in league.members.items():
        b = back[name]
        assert weights_hash(b.policy) == weights_hash(m.policy), name
        assert (b.parent, b.snapshot, b.teachers, b.policy.version) == (
            m.parent, m.snapshot, m.teachers, m.policy.version
        )  # fmt: skip
        assert isinstance(b.policy, Frozen) == isinstance(m.policy, Frozen)
    names = ["actor_lr", "top_p", "epsilon"]
    assert get_hparams(back["gen"].spec, names) == get_hparams(league["gen"].spec, names)
    assert back.history == league.history and back.counters == league.counters
    assert back.iteration == 1 and league_table(back) == league_table(league)
    assert back.mapping.rng.random() == league.mapping.rng.random()
    assert back_pbt is not None and back_pbt.members == pbt.members
    assert back_pbt.rng.random() == pbt.rng.random()
    # frozen snapshots are written once: a second save reuses their files
    snap_file = {m["name"]: m["weights"] for m in _state(tmp_path)["members"]}["clicks@1"]
    nudge(league["gen"].policy)
    save_league(league, tmp_path, pbt)
    files = {m["name"]: m["weights"] for m in _state(tmp_path)["members"]}
    assert files["clicks@1"] == snap_file
    assert len(list((tmp_path / "weights").glob("*.safetensors"))) == len(files)


def _state(path: Path) -> dict:
    return json.loads((path / "league.json").read_text())


def test_corrupt_state_fails_in_one_line(tmp_path: Path) -> None:
    league, pbt = _league()
    save_league(league, tmp_path, pbt)
    state = _state(tmp_path)
    weights = tmp_path / state["members"][0]["weights"]
    other = tmp_path / state["members"][1]["weights"]
    weights.write_bytes(other.read_bytes())  # gen's file now holds clicks' weights
    with pytest.raises(DataError, match="hash differs") as err:
        load_league(tmp_path)
    assert "\n" not in str(err.value)
    (tmp_path / "league.json").write_text("{")
    with pytest.raises(DataError, match="not valid JSON"):
        load_league(tmp_path)


CHILD = textwrap.dedent(
    """
    import sys, torch
    torch.set_num_threads(1)
    from devicerl.league.config import LeagueConfig, PBTConfig, SnapshotConfig
    from devicerl.league.pbt import PBT
    from devicerl.league.persist import load_league, save_league
    from devicerl.league.state import League
    from tests.league_helpers import nudge, tiny_spec

    out, resume = sys.argv[1], sys.argv[2] == "resume"
    if resume:
        league, pbt = load_league(out)
    else:
        config = LeagueConfig(snapshot=SnapshotConfig(window=4),
                              pbt=PBTConfig(policy="gen", population=2, interval=2))
        league = League.build({"gen": tiny_spec(), "clicks": tiny_spec("click-*")}, config)
        pbt = PBT(league, config.pbt)
        pbt.populate()
    for _ in range(int(sys.argv[3])):
        for name in league.trainable():
            nudge(league[name].policy, 0.001)
            league[name].policy.version += 1
            for i in range(4):
                league.record(name, "click-a" if name == "clicks" else "t", i < 3 or name != "gen")
        league.end_iteration()
        pbt.step()
        save_league(league, out, pbt)
        print(league.iteration, flush=True)
    """
)


def test_kill_9_mid_run_then_resume_with_league_state_intact(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-c", CHILD, str(tmp_path)]
    child = subprocess.Popen([*cmd, "new", "1000"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout is not None
        for line in child.stdout:
            if int(line) >= 4:
                break
        child.send_signal(signal.SIGKILL)  # mid-run: it is saving again
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL
    saved = _state(tmp_path)
    league, pbt = load_league(tmp_path)  # checks every member's weights hash
    assert league.iteration == saved["iteration"] >= 4
    assert pbt is not None and pbt.members == ["gen", "gen.pbt1"]
    assert league.snapshots_of("clicks")  # snapshots taken before the kill survive
    assert league.counters["snapshots"] >= 2
    assert sum(e["event"] == "exploit" for e in league.history) >= 2
    versions = {m: league[m].policy.version for m in league.trainable()}
    assert min(versions.values()) >= 4
    # resume: two more iterations from the saved state
    done = subprocess.run(
        [*cmd, "resume", "2"], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    again, _ = load_league(tmp_path)
    assert again.iteration == league.iteration + 2
    new = again.history[len(league.history) :]
    exploits = [e["target"] for e in new if e["event"] == "exploit"]
    assert {m: again[m].policy.version for m in again.trainable()} == {
        m: v + 2 + exploits.count(m) for m, v in versions.items()
    }  # two updates each, and one version per weights copied in by an exploit
    assert len(list((tmp_path / "weights").glob("*.safetensors"))) == len(again.members)


def test_devicerl_league_prints_the_table(tmp_path: Path, capsys) -> None:
    from devicerl.cli.main import main

    league, pbt = _league()
    for _ in range(4):
        league.record("clicks", "click-a", True)
    league.end_iteration()
    save_league(league, tmp_path / "run" / "league", pbt)
    assert main(["league", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert out.strip() == f"{league_table(league)}\npbt: gen, gen.pbt1"
    assert "clicks@1 (of clicks)" in out and "clicks -> gen" in out
    assert main(["league", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no league state" in err and err.count("\n") == 1
