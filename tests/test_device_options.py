"""Device options are typed like every other option: a dataclass per kind of device, read by
the config loader (bounds, one-line errors naming the key), listed in ``devicerl train --help``
and counted, saved whole and upgraded on resume; a new kind is a dataclass and one
registration."""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys
from dataclasses import dataclass, field

import pytest
import yaml

from devicerl.cli.common import config_options
from devicerl.config import REDACTED, load_config, save_config
from devicerl.envs import EnvSpec, make, registry
from devicerl.envs.android import AndroidOptions
from devicerl.envs.androidworld.options import AndroidWorldOptions
from devicerl.envs.browser import BrowserOptions
from devicerl.envs.browsergym.options import BrowserGymOptions
from devicerl.envs.foreign import ForeignOptions
from devicerl.envs.synthetic import Latency, SyntheticEnv, SyntheticOptions
from devicerl.errors import ConfigError
from devicerl.runtime.runs.folder import RunDir
from devicerl.runtime.setup.config import TrainConfig
from devicerl.tasks.miniwob import MiniWoBOptions

KINDS = (
    AndroidOptions,
    AndroidWorldOptions,
    BrowserOptions,
    BrowserGymOptions,
    ForeignOptions,
    MiniWoBOptions,
    SyntheticOptions,
)


def _train(*overrides: str) -> TrainConfig:
    return load_config(TrainConfig, None, list(overrides))


def test_each_device_reads_its_own_dataclass() -> None:
    assert type(_train().env.options) is BrowserOptions
    cfg = _train("env.name=miniwob/click-test", "env.options={screenshot: false, time_limit_s: 5}")
    assert cfg.env.options == MiniWoBOptions(screenshot=False, time_limit_s=5.0)
    cfg = _train("env.name=synthetic/tap", "env.options.faults.die=0.5", "env.options.n_boxes=2")
    assert cfg.env.options.faults.die == 0.5 and cfg.env.options.n_boxes == 2
    cfg = _train("env.name=synthetic", "env.options.step_latency={kind: uniform, high: 0.2}")
    assert cfg.env.options.step_latency == Latency("uniform", high=0.2)
    assert type(_train("env.name=android").env.options) is AndroidOptions


@pytest.mark.parametrize(
    "overrides,line",
    [
        (["env.options.jpeg_quality=0"], "env.options.jpeg_quality=0: must be in [1, 100]"),
        (
            ["env.options.swipe=fling"],
            "env.options.swipe: 'fling' is not one of 'auto', 'drag', 'scroll'",
        ),
        (
            ["env.options.screenshot=maybe"],
            "env.options.screenshot: expected true/false, got 'maybe'",
        ),
        (
            ["env.options.viewport=tablet"],
            "env.options: unknown viewport 'tablet'; use auto, desktop, phone or [width, height]",
        ),
        (
            ["env.options.screenshott=false"],
            "unknown config key 'env.options.screenshott' (did you mean 'screenshot'?)",
        ),
        (
            ["env.name=synthetic", "env.options.n_boxes=99"],
            "env.options.n_boxes=99: must be in [1, 24]",
        ),
        (
            ["env.name=synthetic", "env.options.faults.die=2"],
            "env.options.faults.die=2: must be in [0, 1]",
        ),
        (
            ["env.name=synthetic", "env.options.step_latency=often"],
            "env.options: step_latency: cannot parse latency 'often'",
        ),
        (
            ["env.name=synthetic", "env.options.min_len=5", "env.options.max_len=2"],
            "env.options: min_len 5 is more than max_len 2",
        ),
        (
            ["env.name=miniwob", "env.options.serve=ftp"],
            "env.options.serve: 'ftp' is not one of 'http', 'file'",
        ),
        (
            ["env.name=android", "env.options.adb_port=70000"],
            "env.options.adb_port=70000: must be in [1, 65535]",
        ),
        (
            ["env.name=android", "env.options.screenshot=false"],
            "env.options: screenshot and ui_elements are both off; nothing to observe",
        ),
        (["env.name=synthetic", "env.options.serial=x"], "unknown config key 'env.options.serial'"),
        (["env.name=nosuchdevice"], "env.name: unknown device 'nosuchdevice'"),
        (
            ["env.options=5"],
            "env.options: expected a mapping for BrowserOptions, got 5",
        ),
    ],
)
def test_a_bad_device_option_is_one_line_naming_its_key(overrides, line) -> None:
    with pytest.raises(ConfigError) as e:
        _train(*overrides)
    assert str(e.value).startswith(line) and "\n" not in str(e.value), str(e.value)


#: Kinds whose options extend another kind's (listed once, under the broader kind).
BROADER = {MiniWoBOptions: BrowserOptions, AndroidWorldOptions: AndroidOptions}


def test_every_device_option_is_listed_in_help_and_counted() -> None:
    listed = config_options(TrainConfig)
    options = {key: text for key, _, text, _ in listed}
    device = [k for k, _, _, _ in listed if k.startswith("env.options.")]
    own = {
        f.name
        for cls in KINDS
        for f in dataclasses.fields(cls)
        if cls not in BROADER or f.name not in {g.name for g in dataclasses.fields(BROADER[cls])}
    }
    tops = {k.split(".")[2] for k in device}
    assert tops == own and all(options[k].strip() for k in device)
    assert len(device) == 66 and len(listed) == 187  # 121 run + 66 device options
    assert device.count("env.options.screenshot") == 2  # android's and the browser's
    assert options["env.options.time_limit_s"].endswith(
        "[miniwob, miniwob/*, webskills-reach/*, webskills/*]"
    )
    assert "[browser, miniwob," in options["env.options.jpeg_quality"]
    r = subprocess.run(
        [sys.executable, "-m", "devicerl", "train", "--help"], capture_output=True, text=True
    )
    assert r.returncode == 0 and "env.options.jpeg_quality (int, default 90)" in r.stdout
    assert "env.options.faults.die (float, default 0.0)" in r.stdout


def test_the_saved_config_holds_every_option_of_the_device_and_loads_back(tmp_path) -> None:
    cfg = _train("env.name=miniwob", "env.options.task_pages=8", "env.options.screenshot=false")
    save_config(cfg, tmp_path / "config.yaml")
    saved = yaml.safe_load((tmp_path / "config.yaml").read_text())["env"]["options"]
    assert set(saved) == {f.name for f in dataclasses.fields(MiniWoBOptions)}
    assert load_config(TrainConfig, tmp_path / "config.yaml").env.options == cfg.env.options


#: ``env`` of a run config saved while device options were a free mapping.
OLD_ENV = {
    "name": "miniwob",
    "kwargs": {
        "screenshot": False,
        "task_pages": 8,
        "suite_options": {"miniwob": {"time_limit_s": 5, "reload_every": 3}},
    },
    "num_envs": 2,
}


def test_a_run_saved_with_env_kwargs_resumes_with_the_same_meaning(tmp_path) -> None:
    run = RunDir(tmp_path / "run").create()
    run.config_path.write_text(yaml.safe_dump({"env": OLD_ENV}))
    cfg = run.load_config(TrainConfig, ["env.options.settle_ms=100"])
    want = MiniWoBOptions(screenshot=False, task_pages=8, time_limit_s=5.0, reload_every=3)
    assert cfg.env.options == dataclasses.replace(want, settle_ms=100.0)
    old = {"name": "android", "kwargs": {"emulator_console_token": "/keys/console"}}
    assert TrainConfig.upgrade_saved({"env": old})["env"] == {
        "name": "android",
        "options": {"emulator_console_token_file": "/keys/console"},
    }
    redacted = {"name": "android", "kwargs": {"emulator_console_token": REDACTED}}
    assert TrainConfig.upgrade_saved({"env": redacted})["env"]["options"] == {}
    unknown = {"name": "browser", "kwargs": {"suite_options": {"mine": {"x": 1}}}}
    with pytest.raises(ConfigError, match=r"unknown config key 'env\.options\.suite_options'"):
        load_config(TrainConfig, None, [], base=TrainConfig.upgrade_saved({"env": unknown}))


def test_the_emulator_token_file_is_saved_as_it_is(tmp_path) -> None:
    cfg = _train("env.name=android", "env.options.emulator_console_token_file=/keys/console")
    save_config(cfg, tmp_path / "config.yaml")
    loaded = load_config(TrainConfig, tmp_path / "config.yaml")
    assert loaded.env.options.emulator_console_token_file == "/keys/console"


def test_python_callers_get_the_same_checks_and_typed_options() -> None:
    with pytest.raises(ConfigError, match=r"^synthetic\.n_boxes=0: must be in \[1, 24\]$"):
        make("synthetic", n_boxes=0)
    with pytest.raises(
        ConfigError, match=r"synthetic: expected a mapping \(the options of device 'synthetic'"
    ):
        EnvSpec("synthetic", BrowserOptions())
    spec = EnvSpec("synthetic/tap", {"n_boxes": 2, "render": False})
    assert spec.options == SyntheticOptions(n_boxes=2, render=False)
    again = pickle.loads(pickle.dumps(spec))  # what a worker process receives
    env = again.make()
    assert isinstance(env, SyntheticEnv) and len(env.reset(seed=0).elements) == 2
    env.close()


@dataclass
class CounterOptions:
    """The options of a device kind added in this test: one dataclass."""

    start: int = field(default=0, metadata={"help": "the first count", "min": 0})
    label: str = field(default="counter", metadata={"help": "what the device calls itself"})


def counter_device(task=None, options: CounterOptions | None = None) -> SyntheticEnv:
    env = SyntheticEnv(task or "synthetic/steps", SyntheticOptions(render=False))
    env.counter_options = options  # what the factory was given
    return env


def test_a_new_device_kind_is_a_dataclass_and_one_registration(monkeypatch) -> None:
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register("counter", counter_device, options=CounterOptions)  # the registration
    cfg = _train("env.name=counter", "env.options.start=3")
    assert cfg.env.options == CounterOptions(start=3)
    with pytest.raises(ConfigError, match=r"^env\.options\.start=-1: must be >= 0$"):
        _train("env.name=counter", "env.options.start=-1")
    help_ = {key: text for key, _, text, _ in config_options(TrainConfig)}
    assert help_["env.options.start"] == "the first count (>= 0) [counter]"
    env = make("counter", label="mine")
    assert env.counter_options == CounterOptions(label="mine")
    env.close()
