import pickle

import pytest

from devicerl.agents.api import APIAgent
from devicerl.agents.factory import AgentSpec, make_agent
from devicerl.agents.small import SmallAgent
from devicerl.config import from_dict, load_config
from devicerl.errors import ConfigError


def test_spec_from_yaml_builds_agents_and_pickles(tmp_path) -> None:
    cfg = tmp_path / "agent.yaml"
    cfg.write_text(
        "kind: small\nsmall: {d_model: 64, heads: [points, page_text], inputs: [field_labels]}\n"
        "api: {chat: {base_url: 'http://127.0.0.1:9/v1', model: m}}\n"
    )
    spec = load_config(AgentSpec, cfg, ["small.allowed_types=[DUAL_POINT, TYPE]"])
    spec = pickle.loads(pickle.dumps(spec))
    agent = spec.make()
    assert isinstance(agent, SmallAgent) and agent.config.d_model == 64
    assert agent.config.allowed_types == ("DUAL_POINT", "TYPE")
    assert agent.config.heads == ("points", "page_text")
    assert agent.config.features.field_labels and not agent.config.features.pixels
    agent.save(tmp_path / "saved")
    again = make_agent("small", path=str(tmp_path / "saved"))
    assert again.config == agent.config
    api = make_agent(AgentSpec(kind="api", api=spec.api, include_elements=False))
    assert isinstance(api, APIAgent) and not api.trainable and not api.include_elements
    assert (api.temperature, api.history) == (0.0, 4)  # its own defaults
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


def test_small_heads_and_inputs_are_lists_of_names(tmp_path) -> None:
    default = AgentSpec().small.architecture()
    assert default.heads == ("swipes",)
    assert not (default.features.pixels or default.features.field_labels)
    spec = load_config(
        AgentSpec, None, ["small.heads=[swipes,points,free_text]", "small.inputs=[pixels]"]
    )
    arch = spec.small.architecture()
    assert arch.heads == ("swipes", "points", "free_text")
    assert arch.features.pixels and not arch.features.field_labels
    assert load_config(AgentSpec, None, ["small.heads=[]"]).small.architecture().heads == ()
    cfg = tmp_path / "heads.yaml"
    cfg.write_text("small:\n  heads:\n    - page_text\n  inputs: []\n")
    assert load_config(AgentSpec, cfg).small.architecture().heads == ("page_text",)
    for override, match in (
        ("small.heads=[swipes,jump]", r"agent\.small\.heads: 'jump' is not one of swipes, "),
        ("small.inputs=[audio]", r"agent\.small\.inputs: 'audio' is not one of pixels, "),
        ("small.heads=points", r"small\.heads: expected a list"),
    ):
        with pytest.raises(ConfigError, match=match) as e:
            load_config(AgentSpec, None, [override])
        assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "key",
    [
        "small.n_layers=1",
        "small.temperature=0.5",
        "small.swipes=false",
        "small.point_actions=true",
        "small.page_text=true",
        "small.free_text=true",
        "small.pixels=true",
        "small.field_labels=true",
        "autoui.max_new_tokens=64",
        "autoui.history=2",
        "autoui.temperature=0.5",
        "autoui.vision_features=patch",
        "vlm.temperature=0.5",
        "vlm.history=2",
        "vlm.include_elements=true",
        "vlm.train_vision=true",
        "vlm.output_format=autoui",
        "api.temperature=0.5",
        "api.history=2",
        "api.include_elements=false",
    ],
)
def test_removed_agent_options_fail_naming_the_key(key) -> None:
    with pytest.raises(ConfigError, match=f"unknown config key '{key.partition('=')[0]}'"):
        load_config(AgentSpec, None, [key])


def test_an_older_run_configs_agent_section_is_upgraded(caplog) -> None:
    from devicerl.agents.config import upgrade_saved_agent

    old = {
        "kind": "small",
        "small": {"d_model": 64, "n_layers": 2, "allowed_types": ["DUAL_POINT", "TYPE"]}
        | {"swipes": False, "point_actions": True, "page_text": False, "free_text": True}
        | {"pixels": True, "field_labels": False, "cell_attention": "gated", "temperature": 1.0}
        | {"epsilon": 0.05},
        "autoui": {"max_new_tokens": 64, "history": 4, "temperature": 1.0}
        | {"vision_features": "pooled", "lora": {"r": 4}},
    }
    with caplog.at_level("WARNING"):
        spec = from_dict(AgentSpec, upgrade_saved_agent(old), prefix="agent")
    assert spec.small.heads == ("points", "free_text") and spec.small.inputs == ("pixels",)
    assert spec.small.cell_attention == "gated" and spec.small.d_model == 64
    assert spec.autoui is not None and spec.autoui.lora is not None and spec.autoui.lora.r == 4
    # only a value other than the one now used is worth a warning
    assert [r.getMessage().split("=")[0] for r in caplog.records] == ["agent.autoui.max_new_tokens"]
    # a section in today's layout, or with swipes left unset (on), upgrades as it should
    now = {"small": {"heads": ["page_text"], "inputs": []}}
    assert upgrade_saved_agent(now) == now
    assert upgrade_saved_agent({"small": {"page_text": True}})["small"] == {
        "heads": ["swipes", "page_text"],
        "inputs": [],
    }


def test_agent_wide_settings_reach_the_agents_that_read_them(tmp_path) -> None:
    spec = load_config(AgentSpec, None, ["temperature=0.5", "small.d_model=32"])
    agent = spec.make()
    assert isinstance(agent, SmallAgent) and agent.temperature == agent.config.temperature == 0.5
    agent.save(tmp_path / "saved")
    assert make_agent("small", path=str(tmp_path / "saved")).temperature == 0.5  # its own
    again = make_agent("small", path=str(tmp_path / "saved"), temperature=2.0)
    assert again.temperature == again.config.temperature == 2.0
    assert make_agent("small").temperature == 1.0  # null: the agent's own default
    chat = {"chat": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}
    api = load_config(AgentSpec, None, ["kind=api", "api.chat.model=m", "history=0"]).make()
    assert isinstance(api, APIAgent) and api.history == 0 and api.temperature == 0.0
    api = make_agent("api", api=from_dict(AgentSpec, {"api": chat}).api, temperature=0.7)
    assert api.temperature == api.client.temperature == 0.7 and api.include_elements
    for kw, match in (
        ({"kind": "small", "history": 2}, r"agent\.history: the small agent does not read it"),
        ({"kind": "autoui", "path": "x", "include_elements": True}, r"agent\.include_elements"),
        ({"kind": "random", "temperature": 1.0}, r"agent\.temperature: the random agent"),
        ({"kind": "small", "temperature": 0.0}, r"agent\.temperature=0\.0: must be > 0"),
    ):
        with pytest.raises(ConfigError, match=match) as e:
            AgentSpec(**kw).validate()
        assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="history=-1: must be >= 0"):
        load_config(AgentSpec, None, ["history=-1"])


def test_an_older_run_configs_per_kind_settings_become_the_agents_own(caplog) -> None:
    from devicerl.agents.config import upgrade_saved_agent

    chat = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}
    old_api = {"include_elements": False, "history": 2, "temperature": 0.0}
    old_vlm = {"output_format": "json", "history": 0, "include_elements": True}
    old_vlm |= {"temperature": 0.8, "train_vision": False, "max_new_tokens": 48}
    old = {"kind": "vlm", "path": "m", "vlm": old_vlm, "api": {"chat": chat, **old_api}}
    with caplog.at_level("WARNING"):
        spec = from_dict(AgentSpec, upgrade_saved_agent(old), prefix="agent")
    assert (spec.temperature, spec.history, spec.include_elements) == (0.8, 0, True)
    assert spec.vlm is not None and spec.vlm.max_new_tokens == 48 and not caplog.records
    # the api section's copies were never read by a vlm run: dropped
    assert spec.api.chat.model == "m"
    spec = from_dict(AgentSpec, upgrade_saved_agent({**old, "kind": "api"}), prefix="agent")
    assert (spec.temperature, spec.history, spec.include_elements) == (0.0, 2, False)
    # a new small agent read its temperature; a saved one (path) kept its own
    small = {"kind": "small", "small": {"temperature": 0.5}}
    assert upgrade_saved_agent(small)["temperature"] == 0.5
    assert "temperature" not in upgrade_saved_agent({**small, "path": "runs/x/agent"})
    with caplog.at_level("WARNING"):
        upgrade_saved_agent({"kind": "vlm", "vlm": {"output_format": "autoui"}})
    assert "agent.vlm.output_format='autoui'" in caplog.records[-1].getMessage()
