from dataclasses import dataclass, field
from typing import Literal

import pytest
import yaml

from devicerl.cli.common import config_options
from devicerl.config import load_config, save_config
from devicerl.errors import ConfigError


@dataclass
class Pool:
    workers: int = 4
    kind: Literal["serial", "subprocess"] = "subprocess"


@dataclass
class Cfg:
    lr: float = 1e-4
    name: str = "run"
    api_key: str = ""
    tags: list[str] = field(default_factory=list)
    pool: Pool = field(default_factory=Pool)
    note: str | None = field(default=None, metadata={"help": "free text"})


def test_yaml_and_overrides(tmp_path) -> None:
    p = tmp_path / "c.yaml"
    p.write_text("lr: 0.001\npool:\n  workers: 2\ntags: [a, b]\n")
    cfg = load_config(Cfg, p, ["pool.kind=serial", "lr=3e-4", "name=x"])
    assert cfg.lr == 3e-4 and cfg.pool.workers == 2 and cfg.pool.kind == "serial"
    assert cfg.tags == ["a", "b"] and cfg.name == "x"


@pytest.mark.parametrize(
    "override,message",
    [
        ("lrr=1", "unknown config key 'lrr' (did you mean 'lr'?)"),
        ("pool.workers=many", "pool.workers: expected an integer"),
        ("pool.kind=thread", "pool.kind: 'thread' is not one of"),
        ("pool.nope=1", "unknown config key 'pool.nope'"),
        ("tags=3", "tags: expected a list"),
        ("novalue", "must look like key.path=value"),
    ],
)
def test_bad_config_fails_in_one_line(override: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(Cfg, None, [override])
    assert message in str(e.value) and "\n" not in str(e.value)


def test_bad_yaml_names_file(tmp_path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("lr: [1,\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml"):
        load_config(Cfg, p)


def test_secrets_redacted(tmp_path) -> None:
    cfg = load_config(Cfg, None, ["api_key=sk-123"])
    save_config(cfg, tmp_path / "config.yaml")
    text = (tmp_path / "config.yaml").read_text()
    assert "sk-123" not in text
    assert yaml.safe_load(text)["pool"]["workers"] == 4


def test_field_help() -> None:
    h = {key: text for key, _, text, _ in config_options(Cfg)}
    assert "pool.workers" in h and "free text" in h["note"]
