"""Rule: numbers are finite and bounded, checked at load in one place (the config loader, from
field metadata): every float of every config is finite, every integer fits in 64 bits (seeds
0..2**63-1), counts are > 0 where declared, a minibatch is at most what the replay holds; YAML
keys are unique and aliases cannot expand without bound."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
from _holes import cli

from devicerl.cli.common import config_options
from devicerl.config import MAX_YAML_NODES, load_config
from devicerl.envs.registry import option_kinds
from devicerl.errors import ConfigError
from devicerl.judges.config import JudgeConfig
from devicerl.runtime.reports.viewer import ViewConfig
from devicerl.runtime.setup.config import TrainConfig


def numeric_options(cls: type) -> list[tuple[str, str]]:
    return [(key, tp) for key, tp, _, _ in config_options(cls) if tp in ("int", "float")]


ALL = [(cls, key, tp) for cls in (TrainConfig, ViewConfig, JudgeConfig)
       for key, tp in numeric_options(cls)]  # fmt: skip


def device_taking(key: str) -> list[str]:
    """``env.options.*`` are the options of the device env.name names: one that takes ``key``."""
    if not key.startswith("env.options."):
        return []
    top = key.split(".")[2]
    kinds = option_kinds().items()
    name = next(n[0] for cls, n in kinds if top in {f.name for f in dataclasses.fields(cls)})
    return [f"env.name={name}"]


def test_the_rule_covers_many_fields() -> None:
    assert len(ALL) >= 50  # 55 numeric options in the three configs (a broken walk finds few)


@pytest.mark.parametrize("cls,key,tp", ALL, ids=[f"{c.__name__}.{k}" for c, k, _ in ALL])
def test_every_number_of_every_config_is_finite_and_fits(cls, key, tp) -> None:
    values = [".inf", "-.inf", ".nan", "1.0e400"]
    values += [str(2**64), str(-(2**64)), "1.0e+19"] if tp == "int" else []  # a float may be
    for value in values:
        with pytest.raises(ConfigError) as e:
            load_config(cls, None, [*device_taking(key), f"{key}={value}"])
        line = str(e.value)
        assert "\n" not in line and line.startswith(key), line
        assert "finite" in line or "must be" in line or "expected an integer" in line, line


@pytest.mark.parametrize(
    "override,line",
    [
        ("seed=9223372036854775808", "seed=9223372036854775808: must be in [0, 9223372036854775807]"),  # noqa: E501
        ("seed=-1", "seed=-1: must be >= 0"),
        ("seed=1.0e+19", "seed=10000000000000000000: must be in [0, 9223372036854775807]"),
        ("agent.seed=1.0e+19", "agent.seed=10000000000000000000: must be in [-9223372036854775808, 9223372036854775807]"),  # noqa: E501
        ("actor.lr=.inf", "actor.lr=inf: must be a finite number"),
        ("digirl.top_p=.nan", "digirl.top_p=nan: must be a finite number"),
        ("env.options={settle_ms: .nan}", "env.options.settle_ms=nan: must be a finite number"),
        ("env.options={max_elements: 99999999999999999999}", "env.options.max_elements=99999999999999999999: must be in [0, 9223372036854775807]"),  # noqa: E501
        ("actor.batch_size=1000000000", "actor.batch_size=1000000000: must be <= replay_capacity (2000)"),  # noqa: E501
        ("critic.batch_size=2001", "critic.batch_size=2001: must be <= replay_capacity (2000)"),
        ("replay_capacity=1000000000000", "replay_capacity=1000000000000: must be in [1, 10000000]"),  # noqa: E501
        ("trajectories_per_iter=-3", "trajectories_per_iter=-3: must be >= 1"),
    ],
)  # fmt: skip
def test_bounds_answer_in_one_line(override, line) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(TrainConfig, None, [override])
    assert str(e.value) == line


def test_the_largest_seed_and_a_batch_the_replay_holds_are_accepted() -> None:
    cfg = load_config(
        TrainConfig,
        None,
        [f"seed={2**63 - 1}", "replay_capacity=100", "actor.batch_size=100"],
    )
    assert cfg.seed == 2**63 - 1 and cfg.actor.batch_size == 100


def test_batch_sizes_follow_the_replay_in_league_policies_too() -> None:
    with pytest.raises(ConfigError, match=r"^policies.a.actor.batch_size=5000: must be <="):
        load_config(
            TrainConfig,
            None,
            ["policies={a: {actor: {batch_size: 5000}}}", "replay_capacity=4000"],
        )


def test_duplicate_keys_are_refused_at_every_level(tmp_path) -> None:
    (tmp_path / "c.yaml").write_text("digirl:\n  rehearsal:\n    per_task: 1\n    per_task: 2\n")
    with pytest.raises(
        ConfigError, match=r"line 4, column 5: duplicate key 'per_task' \(first on line 3\)"
    ):
        load_config(TrainConfig, tmp_path / "c.yaml")
    (tmp_path / "merge.yaml").write_text(
        "base: &b {lr: 0.1, updates: 3}\nactor:\n  <<: *b\n  lr: 0.2\n"
    )  # a merge key's values may be overridden: that is no duplicate
    with pytest.raises(ConfigError, match="unknown config key 'base'"):
        load_config(TrainConfig, tmp_path / "merge.yaml")


def bomb(levels: int = 9) -> str:
    text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, levels):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        text += f"a{i}: &a{i} [{refs}]\n"
    return text  # 10**9 nodes once expanded, in a few hundred bytes


def test_aliases_cannot_expand_without_bound(tmp_path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb())
    r = subprocess.run(
        [sys.executable, "-m", "devicerl", "train", "--config", str(path), "--print-config"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stderr.strip() == (
        f"devicerl train: error: config {path} is not valid YAML: its aliases expand to more "
        f"than {MAX_YAML_NODES} nodes"
    )
    inline = "env.options=" + "{" + bomb().replace("\n", ", ").rstrip(", ") + "}"
    with pytest.raises(ConfigError, match=r"env\.options: expected a mapping"):
        load_config(TrainConfig, None, [inline])  # not expanded: read as text, refused


@pytest.mark.parametrize(
    "argv,line",
    [
        (["demo", "--synthetic", "--episodes", "-5"], "argument --episodes: must be in [1, 1000000]"),  # noqa: E501
        (["demo", "--synthetic", "--devices", "0"], "argument --devices: must be in [1, 256]"),
        (["demo", "--seed", "-1"], "argument --seed: must be >= 0"),
        (["demo", "--budget", "1e9"], "argument --budget: expected an integer, got '1e9'"),
        (["judge-eval", ".", "--limit", "-1"], "argument --limit: must be >= 0"),
    ],
)  # fmt: skip
def test_command_line_counts_use_the_same_bounds(argv, line, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli(capsys, *argv)
    assert line in r.one_line() and not any(tmp_path.iterdir())
