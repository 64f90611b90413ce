import pickle

import pytest

from devicerl.agents.api import APIAgent
from devicerl.agents.factory import AgentSpec, make_agent
from devicerl.agents.small import SmallAgent
from devicerl.config import load_config
from devicerl.errors import ConfigError


def test_spec_from_yaml_builds_agents_and_pickles(tmp_path) -> None:
    cfg = tmp_path / "agent.yaml"
    cfg.write_text(
        "kind: small\nsmall: {d_model: 64, n_layers: 1, temperature: 0.5}\n"
        "api: {chat: {base_url: 'http://127.0.0.1:9/v1', model: m}, include_elements: false}\n"
    )
    spec = load_config(AgentSpec, cfg, ["small.allowed_types=[DUAL_POINT, TYPE]"])
    spec = pickle.loads(pickle.dumps(spec))
    agent = spec.make()
    assert isinstance(agent, SmallAgent) and agent.temperature == 0.5
    assert agent.config.allowed_types == ("DUAL_POINT", "TYPE")
    agent.save(tmp_path / "saved")
    again = make_agent("small", path=str(tmp_path / "saved"))
    assert again.config == agent.config
    api = make_agent(AgentSpec(kind="api", api=spec.api))
    assert isinstance(api, APIAgent) and not api.trainable and not api.config.include_elements
    assert make_agent("random").act([]) == []


def test_bad_specs_fail_in_one_line(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"agent\.kind"):
        make_agent("gpt")
    with pytest.raises(ConfigError, match=r"agent\.path"):
        make_agent("autoui")
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("kind: small\nsmall: {d_modl: 3}\n")
    with pytest.raises(ConfigError, match="d_modl"):
        load_config(AgentSpec, cfg)
