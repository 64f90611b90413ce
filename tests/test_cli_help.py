"""`devicerl --help` and every verb's help: no torch imported, whole help texts with real
examples, a description for every verb; `--resume` with `--config` / `--print-config`."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from devicerl.cli.common import EXAMPLES, config_options
from devicerl.cli.main import COMMANDS, build_parser
from devicerl.config import load_config, save_config

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "pyarrow", "httpx", "ray", "playwright", "PIL")


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120
    )


def test_help_of_every_verb_imports_no_torch() -> None:
    script = (
        "import contextlib, io, json, sys\n"
        "from devicerl.cli.main import COMMANDS, main\n"
        "for argv in [['--help'], *[[c, '--help'] for c in COMMANDS]]:\n"
        "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "        main(argv)\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    r = _run("-c", script)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == []


def test_the_real_command_imports_no_torch_for_help() -> None:
    r = _run("-X", "importtime", "-m", "devicerl", "train", "--help")
    assert r.returncode == 0 and "config options (TrainConfig)" in r.stdout
    imported = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if "|" in line}
    assert "torch" not in imported and "devicerl.runtime.loop.trainer" not in imported


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_verb_has_a_description_and_every_option_a_whole_help_text() -> None:
    verbs = _subparsers(build_parser())
    assert set(verbs) == set(COMMANDS)
    for name, p in verbs.items():
        assert p.description and len(p.description) > 40, name
        text = p.format_help()
        assert "Ellipsis" not in text and "train.lr" not in text, name
        cls = p.get_default("config_cls")
        for key, _type, help_text, _ in config_options(cls) if cls else []:
            assert help_text.strip(), f"{name}: {key} has no help"
            assert not help_text.rstrip(")").endswith((" after", " with", " of")), key


@pytest.mark.parametrize("cls_name", sorted(EXAMPLES))
def test_the_set_examples_are_real_keys(cls_name) -> None:
    verbs = _subparsers(build_parser())
    classes = {c.__name__: c for p in verbs.values() if (c := p.get_default("config_cls"))}
    load_config(classes[cls_name], None, [EXAMPLES[cls_name]])  # raises on an unknown key


def test_an_empty_override_is_an_empty_string_as_the_docs_say() -> None:
    from devicerl.judges.config import JudgeConfig

    assert load_config(JudgeConfig, None, ["vlm.cache_path="]).vlm.cache_path == ""


def test_resume_refuses_config_and_prints_the_resumed_config_without_writing(tmp_path) -> None:
    from devicerl.runtime.setup.config import TrainConfig

    run = tmp_path / "run"
    save_config(load_config(TrainConfig, None, ["seed=7", "env.num_envs=2"]), run / "config.yaml")
    before = (run / "config.yaml").read_bytes()
    other = tmp_path / "other.yaml"
    other.write_text("seed: 1\n")
    r = _run("-m", "devicerl", "train", "--resume", str(run), "--config", str(other))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "--config" in r.stderr and "KEY=VALUE" in r.stderr
    r = _run("-m", "devicerl", "train", "--resume", str(run), "--print-config", "env.num_envs=3")
    assert r.returncode == 0, r.stderr
    assert "seed: 7" in r.stdout and "num_envs: 3" in r.stdout
    assert (run / "config.yaml").read_bytes() == before
    assert sorted(p.name for p in run.iterdir()) == ["config.yaml"]
