"""CLI plumbing through the real entry point (subprocesses), and the config helpers."""

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest
import yaml
from _runs import devicerl_cli as devicerl

from devicerl.cli.common import (
    add_config_args,
    config_help,
    parse_args,
    resolve_config,
    start_run,
)
from devicerl.config import REDACTED, load_config, shipped_configs
from devicerl.errors import ConfigError


def test_help_lists_every_option_with_default() -> None:
    r = devicerl("view", "--help")
    assert r.returncode == 0
    for line in ("max_episodes (int, default 200)", "skip_bad (bool, default true)"):
        assert line in r.stdout
    assert "show the newest N episodes" in r.stdout and "--set KEY=VALUE" in r.stdout
    r = devicerl("--help")
    assert all(c in r.stdout for c in ("view", "bench", "import-digirl", "demo", "tasks"))


@pytest.mark.parametrize(
    "args,message",
    [
        (["--set", "max_episode=5"], "unknown config key 'max_episode' (did you mean 'max_episodes'?)"),  # noqa: E501
        (["max_episodes=many"], "max_episodes: expected an integer, got 'many'"),
        (["--set", "image_quality=500"], "image_quality=500: must be in [1, 95]"),
        (["--set", "curves"], "override 'curves' must look like key.path=value"),
    ],
)  # fmt: skip
def test_bad_config_fails_at_start_in_one_line(tmp_path, args, message) -> None:
    r = devicerl("view", str(tmp_path), *args)
    assert r.returncode == 2
    assert r.stderr.strip() == f"devicerl view: error: {message}"
    assert not (tmp_path / "report").exists()  # failed before doing anything


def test_config_file_overrides_and_print(tmp_path) -> None:
    cfg = tmp_path / "view.yaml"
    cfg.write_text("max_episodes: 7\ncurves: false\n")
    r = devicerl("view", str(tmp_path), "--config", str(cfg), "--set", "image_quality=50",
                 "--print-config", "image_max_side=99")  # fmt: skip
    assert r.returncode == 0, r.stderr
    printed = yaml.safe_load(r.stdout)
    assert printed == {
        "max_episodes": 7, "image_max_side": 99, "image_quality": 50, "curves": False,
        "skip_bad": True,
    }  # fmt: skip
    r = devicerl("view", str(tmp_path / "missing"))
    assert r.returncode == 2 and "does not exist" in r.stderr
    r = devicerl("tasks", "synthetic/t*", "a=b")  # commands without a config refuse overrides
    assert r.returncode == 2 and "unrecognized arguments: a=b" in r.stderr


def test_bench_lists_and_runs_by_name(tmp_path) -> None:
    bench = tmp_path / "benchmarks"
    bench.mkdir()
    (bench / "echo_args.py").write_text(
        '"""Echo the arguments."""\nimport sys\nprint("ARGS", sys.argv[1:])\n'
    )
    r = devicerl("bench", "--dir", str(bench))
    assert r.returncode == 0 and "echo_args  Echo the arguments." in r.stdout
    r = devicerl("bench", "--dir", str(bench), "echo_args", "--quick", "--json", "x.json")
    assert r.returncode == 0 and "ARGS ['--quick', '--json', 'x.json']" in r.stdout
    r = devicerl("bench", "--dir", str(bench), "nope")
    assert r.returncode == 2 and "unknown benchmark 'nope' (available: echo_args)" in r.stderr
    r = devicerl("bench")  # the repository's own benchmarks
    assert r.returncode == 0 and "store_codec" in r.stdout


@dataclass
class _Pool:
    workers: int = field(default=4, metadata={"help": "device workers"})
    kind: Literal["serial", "subprocess"] = "subprocess"


@dataclass
class _Cfg:
    lr: float = 1e-4
    api_key: str = ""
    pool: _Pool = field(default_factory=_Pool)


def test_helpers_for_other_commands(tmp_path) -> None:
    parser = argparse.ArgumentParser(prog="devicerl train")
    parser.add_argument("run_dir")
    add_config_args(parser, _Cfg)
    assert 'pool.kind (serial|subprocess, default "subprocess")' in config_help(_Cfg)
    assert "device workers" in parser.format_help()
    args = parse_args(parser, [str(tmp_path / "run"), "--set", "pool.workers=2", "api_key=sk-1"])
    cfg = resolve_config(args)
    assert cfg.pool.workers == 2 and cfg.api_key == "sk-1"
    run = start_run(args.run_dir, cfg)
    saved = yaml.safe_load(run.config_path.read_text())
    assert saved["api_key"] == REDACTED and saved["pool"]["workers"] == 2
    with pytest.raises(ConfigError, match=r"pool\.kind: 'thread' is not one of"):
        resolve_config(parser.parse_args(["r", "pool.kind=thread"]))


def test_config_takes_a_file_or_a_shipped_setup_by_name(tmp_path, monkeypatch) -> None:
    from devicerl.config import config_source, shipped_configs

    shipped = shipped_configs()
    assert {"miniwob-digirl-paper", "miniwob-digirl-tuned", "league-example"} <= set(shipped)
    assert all(path.is_file() and path.suffix == ".yaml" for path in shipped.values())
    tuned = shipped["miniwob-digirl-tuned"]
    assert config_source("miniwob-digirl-tuned") == tuned
    assert config_source("miniwob-digirl-tuned.yaml") == tuned
    with pytest.raises(ConfigError, match=r"did you mean miniwob-digirl-tuned\?"):
        config_source("configs/miniwob-digirl-tuned.yaml")  # the old checkout path: not a file
    r = devicerl("train", "--config", "nope", "--print-config")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "config nope is neither a file nor a shipped setup" in r.stderr
    r = devicerl("train", "--config", "miniwob-digirl-paper", "--print-config", "seed=4")
    assert r.returncode == 0 and yaml.safe_load(r.stdout)["seed"] == 4
    monkeypatch.chdir(tmp_path)
    (tmp_path / "miniwob-digirl-tuned.yaml").write_text("seed: 7\n")  # a file wins over a name
    assert config_source("miniwob-digirl-tuned.yaml") == Path("miniwob-digirl-tuned.yaml")
    assert config_source("miniwob-digirl-tuned") == tuned


@pytest.mark.parametrize("name", sorted(shipped_configs()))
def test_every_shipped_setup_loads(name) -> None:
    """Each setup shipped with the package loads (a renamed or removed option fails here)."""
    from devicerl.runtime.setup.config import TrainConfig

    path = shipped_configs()[name]
    offline = yaml.safe_load(path.read_text()).get("mode") == "offline"  # data named at the run
    cfg = load_config(TrainConfig, path, ["offline_data=runs/demos"] if offline else [])
    assert cfg.mode in ("online", "offline", "off2on", "eval")
