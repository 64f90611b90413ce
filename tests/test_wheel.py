"""The package as a user installs it: a wheel built from the checkout, installed (not editable)
into a fresh virtual environment and run from a folder outside the checkout, has its shipped
setups (package data), runs the synthetic demo, and claims no git commit."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _run(*cmd: str | Path, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DEVICERL_BENCHMARKS")}
    return subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with the wheel installed; the packages it depends on come from the running
    environment's site-packages (a ``.pth`` line: nothing is downloaded), after its own."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"  # a copy: building writes build/ and *.egg-info beside the sources
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "devicerl", source / "devicerl", ignore=shutil.ignore_patterns("__pycache__")
    )
    dist = tmp / "dist"
    built = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                 "--quiet", "-w", dist, source, cwd=tmp)  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel,) = dist.glob("devicerl-*.whl")
    venv = tmp / "venv"
    made = _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    purelib = _run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=tmp)
    (Path(purelib.stdout.strip()) / "_running_env.pth").write_text(
        "\n".join(site.getsitepackages()) + "\n"
    )
    pip = _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps",
               "--quiet", wheel, cwd=tmp)  # fmt: skip
    assert pip.returncode == 0, pip.stderr
    return venv


def test_the_installed_wheel_ships_its_setups_and_runs_the_demo(installed, tmp_path) -> None:
    devicerl = installed / "bin" / "devicerl"
    where = _run(installed / "bin" / "python", "-c", "import devicerl; print(devicerl.__file__)",
                 cwd=tmp_path)  # fmt: skip
    assert where.stdout.startswith(str(installed)), where.stdout + where.stderr  # not the checkout

    r = _run(devicerl, "train", "--config", "miniwob-digirl-tuned", "--print-config", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    printed = yaml.safe_load(r.stdout)
    assert printed["algo"] == "digirl" and printed["tasks"]["train"] == "miniwob-dev"
    r = _run(devicerl, "train", "--config", "league-example", "--print-config", cwd=tmp_path)
    assert r.returncode == 0 and "generalist" in r.stdout, r.stderr
    r = _run(devicerl, "train", "--config", "miniwob-digirl-tuner", cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "did you mean miniwob-digirl-tuned?" in r.stderr

    out = tmp_path / "demo"
    r = _run(devicerl, "demo", "--synthetic", "--episodes", "5", "--devices", "2",
             "--out", out, cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "summary.json").read_text())["episodes"] == 5
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["git_commit"] == "unknown" and provenance["git_dirty"] is None

    r = _run(devicerl, "bench", cwd=tmp_path)  # the benchmarks are the checkout's, not shipped
    assert r.returncode == 2 and "no benchmarks folder found" in r.stderr
