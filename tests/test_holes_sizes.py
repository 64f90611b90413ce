"""Rule: sizes have upper bounds that fit the run and the machine, checked before anything
starts. A group that can never complete, a replay, a minibatch or a population larger than the
memory this machine has is refused in one line naming the option, and nothing is left behind
(no run folder)."""

from __future__ import annotations

import pytest
from _holes import SYN, cli

from devicerl.config import config_source, load_config
from devicerl.errors import ConfigError
from devicerl.runtime.setup.config import TrainConfig

GRPO = [*SYN, "algo=grpo", "trajectories_per_iter=4"]


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ([*GRPO, "env_steps=20", "grpo.group_size=64"], "grpo.group_size=64"),
        ([*GRPO, "env_steps=100000", "grpo.group_size=64"], "at most 32"),
        ([*SYN, "env_steps=1000000000", "replay_capacity=10000000"], "replay_capacity"),
        ([*SYN, "replay_capacity=10000000", "actor.batch_size=5000000"], "actor.batch_size"),
        (
            ["--config", "league-example", *SYN, "league.pbt.policy=generalist",
             "league.pbt.population=100000000"],
            "league.pbt.population=100000000",
        ),
    ],
)  # fmt: skip
def test_a_size_that_cannot_fit_is_refused_before_anything_starts(
    overrides, named, tmp_path, capsys
) -> None:
    out = tmp_path / "run"
    r = cli(capsys, "train", "--out", out, *overrides)
    assert named in r.one_line()
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_the_bounds_follow_the_memory_there_is() -> None:
    """A minibatch and a replay that fit in 24 GiB do not in 1 GiB; the shipped setups fit a
    development machine (2 cores, 24 GiB)."""
    from devicerl.runtime.setup.sizes import check_sizes

    cfg = load_config(TrainConfig, config_source("miniwob-digirl-tuned"))
    check_sizes(cfg, offline_steps=0, episode_steps=20, memory=24 << 30)
    big = load_config(TrainConfig, None, ["actor.batch_size=2000", "env_steps=100"])
    check_sizes(big, offline_steps=0, episode_steps=20, memory=24 << 30)
    with pytest.raises(ConfigError, match=r"actor.batch_size=2000: .* 2.0 GiB free"):
        check_sizes(big, offline_steps=0, episode_steps=20, memory=2 << 30)
    check_sizes(cfg, offline_steps=10_000_000, episode_steps=20, memory=24 << 30)  # 2000 kept
    roomy = load_config(TrainConfig, None, ["replay_capacity=1000000", "mode=offline",
                                            "offline_data=runs/x"])  # fmt: skip
    with pytest.raises(ConfigError, match=r"replay_capacity=1000000: .* 10000000 steps"):
        check_sizes(roomy, offline_steps=10_000_000, episode_steps=20, memory=24 << 30)


def test_a_group_that_fits_runs_and_learns(tmp_path, capsys) -> None:
    r = cli(capsys, "train", "--out", tmp_path / "run", *GRPO, "grpo.group_size=2",
            "env_steps=40")  # fmt: skip
    assert r.code == 0, r.err
