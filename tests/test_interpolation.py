"""Mixing a trained agent's weights with its start's (`devicerl.agents.interpolation`,
``devicerl interpolate``): on real small agents, every weight is the mix and the result loads
as an agent; other networks, bad alphas and taken folders are refused in one line, and nothing
is left behind."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from devicerl.agents.interpolation import interpolate_agents
from devicerl.agents.small import SmallAgent
from devicerl.agents.small.config import SmallAgentConfig
from devicerl.errors import ConfigError, DataError, PathError


def _agent(seed: int, **kw) -> SmallAgent:
    return SmallAgent(SmallAgentConfig(allowed_types=("DUAL_POINT", "TYPE"), seed=seed, **kw))


@pytest.fixture
def pair(tmp_path):
    start, trained = _agent(1), _agent(2)  # the same network, other weights
    start.save(tmp_path / "start")
    trained.version = 7
    trained.save(tmp_path / "trained")
    return tmp_path / "start", tmp_path / "trained", start, trained


def test_every_weight_is_the_mix_and_the_result_is_an_agent(pair, tmp_path) -> None:
    start_dir, trained_dir, start, trained = pair
    out = interpolate_agents(start_dir, trained_dir, 0.25, tmp_path / "mix")
    mixed = _agent(3)
    mixed.load(out)
    a, b = start.module.state_dict(), trained.module.state_dict()
    for k, v in mixed.module.state_dict().items():
        if v.is_floating_point():
            assert torch.allclose(v, 0.75 * a[k] + 0.25 * b[k], atol=1e-6), k
    assert mixed.version == 7  # the trained agent's settings
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mix", "start", "trained"]
    same = interpolate_agents(start_dir, trained_dir, 1.0, tmp_path / "one")
    files = ("model.safetensors", "small_agent.json")
    assert all((same / f).read_bytes() == (trained_dir / f).read_bytes() for f in files)


def test_other_networks_bad_alphas_and_taken_folders_are_refused(pair, tmp_path) -> None:
    start_dir, trained_dir, _, _ = pair
    _agent(1, d_model=32).save(tmp_path / "other")
    with pytest.raises(DataError, match=r"model\.safetensors: weight .* not the same network"):
        interpolate_agents(tmp_path / "other", trained_dir, 0.5, tmp_path / "bad")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"no \*\.safetensors weights"):
        interpolate_agents(start_dir, tmp_path / "empty", 0.5, tmp_path / "bad")
    with pytest.raises(DataError, match=r"lacks model\.safetensors"):
        interpolate_agents(tmp_path / "empty", trained_dir, 0.5, tmp_path / "bad")
    with pytest.raises(ConfigError, match="between 0 and 1"):
        interpolate_agents(start_dir, trained_dir, 1.5, tmp_path / "bad")
    with pytest.raises(PathError, match="already exists"):
        interpolate_agents(start_dir, trained_dir, 0.5, trained_dir)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "other", "start", "trained"]


def test_the_command_saves_the_mix_or_says_why_not_in_one_line(pair, tmp_path) -> None:
    start_dir, trained_dir, _, _ = pair

    def cli(*args: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "devicerl", "interpolate", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    ok = cli(str(start_dir), str(trained_dir), "--alpha", "0.5", "--out", str(tmp_path / "mix"))
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "mix" / "model.safetensors").is_file()
    (tmp_path / "empty").mkdir()
    bad = cli(
        str(tmp_path / "empty"), str(trained_dir), "--alpha", "0.5", "--out", str(tmp_path / "no")
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "lacks model.safetensors" in bad.stderr and not (tmp_path / "no").exists()
