"""Write the test data of tests/test_holes_saved.py: the ``config.yaml`` a run folder of every
landed layout of the run options holds, each written by that version's own code.

Walks the first-parent history from the first commit with a run config, exports each commit
that changed a dataclass under ``devicerl/`` into a temporary folder and runs its own
``save_config`` there on (a) its `TrainConfig` with every optional section filled and one
league policy (``full.yaml``: every option of that layout) and (b) each setup it shipped. A
commit whose options differ from the previous kept one is a layout; ``full.yaml`` is kept for
every layout, and the shipped setups, whose values are not the defaults (the tuned learning
rates...), for the first layout and each last one before options were removed, as few as cover
every value they set that the defaults do not.

    python scripts/saved_configs.py tests/data/saved_configs   # from a checkout, minutes
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

#: The commit that first saved a run config (``devicerl/runtime/train_config.py``).
FIRST = "5bdcd35"
#: Run inside an exported commit: its saved configs as JSON {name: YAML text or ERROR ...}.
DUMP = r"""
import dataclasses, glob, importlib, json, logging, pathlib, sys, tempfile, types, typing
logging.disable(logging.CRITICAL)
for name in ("devicerl.runtime.setup.config", "devicerl.runtime.train_config"):
    try:
        TC = importlib.import_module(name).TrainConfig
        break
    except ImportError:
        continue
from devicerl.config import load_config, save_config

def fill(obj):
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value, options = getattr(obj, f.name), typing.get_args(hints[f.name])
        if value is None and type(None) in options:
            for tp in options:
                if dataclasses.is_dataclass(tp):
                    try:
                        value = tp()
                    except Exception:
                        value = None
                    setattr(obj, f.name, value)
        if f.name == "model" and value == "":  # a served model needs a name
            setattr(obj, f.name, "m")
        if dataclasses.is_dataclass(value):
            fill(value)
    return obj

def saved(cfg):
    with tempfile.TemporaryDirectory() as d:
        path = pathlib.Path(d) / "config.yaml"
        save_config(cfg, path)
        return path.read_text()

full = fill(TC())
if hasattr(full, "policies"):
    full.policies = {"p": fill(importlib.import_module("devicerl.league.config").PolicySpec())}
out = {"full": saved(full), "default": saved(TC())}
for p in sorted(glob.glob("configs/*.yaml") + glob.glob("devicerl/configs/*.yaml")):
    try:
        out[pathlib.Path(p).stem] = saved(load_config(TC, p))
    except Exception as e:
        out[pathlib.Path(p).stem] = "ERROR " + repr(e)
json.dump(out, sys.stdout)
"""


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def dump(commit: str) -> dict[str, str]:
    """The saved configs of ``commit``, written by its own code."""
    with tempfile.TemporaryDirectory() as tree:
        archive = subprocess.run(["git", "archive", commit], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", tree], input=archive.stdout, check=True)
        env = {"PYTHONPATH": tree, "PATH": "/usr/bin:/bin"}
        done = subprocess.run(
            [sys.executable, "-c", DUMP], cwd=tree, env=env, capture_output=True, text=True
        )
    if done.returncode:
        raise SystemExit(f"{commit}: {done.stderr.strip().splitlines()[-1]}")
    return {k: v for k, v in json.loads(done.stdout).items() if not v.startswith("ERROR")}


def leaves(data: object, prefix: str = "") -> dict[str, str]:
    """Dotted key -> value (as JSON) of every leaf; league policies under one name."""
    if not isinstance(data, dict) or not data:
        return {prefix: json.dumps(data, sort_keys=True)}
    out: dict[str, str] = {}
    for k, v in data.items():
        key = "policies.*" if prefix == "policies" else f"{prefix}.{k}".lstrip(".")
        out.update(leaves(v, key))
    return out


def cover(configs: dict[str, str]) -> list[str]:
    """As few shipped setups as hold every value some shipped setup sets off its default."""
    base = leaves(yaml.safe_load(configs["default"]))
    off = {
        name: {k for k, v in leaves(yaml.safe_load(text)).items() if base.get(k) != v}
        for name, text in configs.items()
        if name not in ("full", "default")
    }
    need, chosen = set().union(*off.values()), []
    while need:
        best = max(off, key=lambda n: len(off[n] & need) / len(configs[n]) ** 0.5)
        chosen.append(best)
        need -= off[best]
    return sorted(chosen)


def main(out: Path) -> None:
    commits = git(
        "log", "--first-parent", "--diff-merges=first-parent", "--no-patch", "--reverse",
        "--format=%h", "-G", r"field\(|@dataclass|^    [a-z_]+: .* = ", f"{FIRST}^..HEAD",
        "--", "devicerl/",
    ).split()  # fmt: skip
    layouts: list[tuple[str, dict[str, str], set[str]]] = []
    for commit in commits:
        configs = dump(commit)
        keys = set(leaves(yaml.safe_load(configs["full"])))
        if not layouts or keys != layouts[-1][2]:
            layouts.append((commit, configs, keys))
    for i, (commit, configs, keys) in enumerate(layouts):
        folder = out / f"{i:02d}-{commit}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "full.yaml").write_text(configs["full"])
        last = i + 1 == len(layouts)
        if i == 0 or (not last and keys - layouts[i + 1][2]):
            for name in cover(configs):
                (folder / f"{name}.yaml").write_text(configs[name])
    print(f"{len(layouts)} layouts written to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
