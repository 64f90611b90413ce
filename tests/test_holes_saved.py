"""Rule: every run folder a landed version wrote resumes with the same meaning, or says exactly
why not in one line. ``tests/data/saved_configs/NN-COMMIT/`` holds the ``config.yaml`` of each
landed layout of the run options, written by that commit's own code
(``scripts/saved_configs.py``): ``full.yaml`` (every option, one league policy) and, before
each round of removals, the shipped setups whose values are not the defaults (tuned learning
rates under ``digirl.actor``...). Each resumes; every value it saved is still there under its
own or its successor's key, or a warning line names it; malformed retired values are one line;
a retired option acts only where it meant something."""

from __future__ import annotations

import dataclasses
import logging
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from _holes import cli

from devicerl.cli.common import config_options
from devicerl.config import REDACTED, to_dict
from devicerl.envs.registry import options_type
from devicerl.errors import ConfigError
from devicerl.runtime.runs.folder import RunDir
from devicerl.runtime.setup.config import TrainConfig

DATA = Path(__file__).parent / "data" / "saved_configs"
FILES = sorted(DATA.glob("*/*.yaml"))
LAYOUTS = sorted(p.name for p in DATA.iterdir())
#: Values whose meaning a later layout spells differently: (saved, today's), any key.
RESPELLED = [(0, None), (0.0, None), ("", None)]
#: Keys whose saved value today's layout spells differently: one learner in the trainer was
#: 0 workers, W&B off was ``wandb: false`` beside a project name.
RESPELLED_AT = {"learner.num_workers": [(0, 1)], "logging.wandb_project": [("devicerl", None)]}


def leaves(data: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(data, dict) or not data or prefix.endswith(("kwargs", "resources")):
        return {prefix: data}
    out: dict[str, Any] = {}
    for k, v in data.items():
        out.update(leaves(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def resume(path: Path, tmp_path: Path) -> TrainConfig:
    """The config ``devicerl train --resume`` reads from a run folder holding ``path``."""
    run = RunDir(Path(tempfile.mkdtemp(dir=tmp_path)) / "run").create()
    run.config_path.write_text(path.read_text())
    return run.load_config(TrainConfig)


def saved(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def test_every_landed_layout_is_here() -> None:
    """One folder per layout, the first landed one first, today's last (every option of
    today, optional sections included: scripts/saved_configs.py is run again when one
    changes)."""
    assert len(LAYOUTS) >= 38 and LAYOUTS[0].endswith("5bdcd35")
    today = {key for key, *_ in config_options(TrainConfig) if not key.startswith("env.options.")}
    full = saved(DATA / LAYOUTS[-1] / "full.yaml")
    assert today <= set(leaves(full)) | {"policies"}
    kind = options_type(full["env"]["name"])  # a run has one device kind, all its options saved
    assert set(full["env"]["options"]) == {f.name for f in dataclasses.fields(kind)}


KWARGS = [p for p in FILES if (saved(p).get("env") or {}).get("kwargs")]


@pytest.mark.parametrize("path", KWARGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_device_options_saved_as_env_kwargs_resume_in_env_options(path, tmp_path) -> None:
    """A run saved while the device's options were a free mapping resumes with each of them
    in its device's options dataclass, unchanged."""
    kwargs, cfg = saved(path)["env"]["kwargs"], resume(path, tmp_path)
    now = to_dict(cfg.env.options)
    for key, value in kwargs.items():
        assert now[key] == value, f"env.kwargs.{key}: saved {value!r}, resumed {now[key]!r}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_saved_config_resumes_with_its_values(path, tmp_path, caplog) -> None:
    """Each value saved under a key today's layout has is there unchanged (``0`` for none
    spelled ``null`` now); what moved is checked below; every warning is one line naming a
    key the config saved."""
    caplog.set_level(logging.WARNING)
    cfg = resume(path, tmp_path)
    data = saved(path)
    old, new = leaves(data), leaves(to_dict(cfg))
    moved = {f"{where}{key}" for where, section, _ in learners(data, cfg) for key in
             _moved(leaves(section), section)}  # fmt: skip
    for key, value in old.items():
        if key in new and key not in moved and value != REDACTED and new[key] != value:
            spelled = RESPELLED + RESPELLED_AT.get(key, [])
            assert (value, new[key]) in spelled, f"{key}: saved {value!r}, resumed {new[key]!r}"
    for record in caplog.records:
        text = record.getMessage()
        assert "\n" not in text and text.split("=")[0] in old, text


def learners(data: dict[str, Any], cfg: TrainConfig) -> list[tuple[str, dict[str, Any], Any]]:
    """(key prefix, saved section, resumed config) of the run and of each league policy."""
    policies = data.get("policies") or {}
    return [("", data, cfg)] + [(f"policies.{n}.", p, cfg.policies[n]) for n, p in policies.items()]


def _moved(old: dict[str, Any], section: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """Today's key -> (the older key, its saved value) of what moved, by the changes' own
    documentation (docs/training.md#options-removed, the commits that moved them)."""
    algo, agent = section.get("algo", "digirl"), section.get("agent") or {}
    out: dict[str, tuple[str, Any]] = {}
    for key in ("lr", "updates", "batch_size", "grad_accum", "loss_floor"):
        if f"{algo}.actor.{key}" in old:
            out[f"actor.{key}"] = (f"{algo}.actor.{key}", old[f"{algo}.actor.{key}"])
    for key in ("lr", "batch_size", "d_model"):
        if f"digirl.critic.{key}" in old:
            out[f"critic.{key}"] = (f"digirl.critic.{key}", old[f"digirl.critic.{key}"])
    for where in ("digirl.critic", "critic"):
        counts = [old[f"{where}.{k}_updates"] for k in ("instruction", "step") if
                  f"{where}.{k}_updates" in old]  # fmt: skip
        if counts:
            out["critic.updates"] = (f"{where}.*_updates", max(counts))
    if "agent.small.explore" in old:
        out["agent.small.epsilon"] = ("agent.small.explore", old["agent.small.explore"])
    if "agent.small.seed" in old and agent.get("kind") == "small" and not agent.get("path"):
        out["agent.seed"] = ("agent.small.seed", old["agent.small.seed"])  # the weights' seed
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_learning_rates_and_moved_options_are_carried(path, tmp_path) -> None:
    """The options that moved (the actor's and the critics' learning rates above all) resume
    with the values saved, for the run and for every league policy."""
    data, cfg = saved(path), resume(path, tmp_path)
    for where, section, learner in learners(data, cfg):
        now = leaves(to_dict(learner))
        for key, (before, value) in _moved(leaves(section), section).items():
            assert now[key] == value, f"{where}{key}: {now[key]!r}, saved {before}={value!r}"


def test_the_tuned_learning_rates_of_the_first_layouts_survive(tmp_path) -> None:
    """The issue's case: a run saved before the learners' sections were split keeps its
    actor and critic learning rates (here the pre-trained setups' 1e-3), DigiRL's and
    Filtered BC's alike."""
    for name in ("miniwob-digirl-pretrained", "miniwob-filteredbc-pretrained"):
        path = DATA / "28-715ef03" / f"{name}.yaml"
        data, cfg = saved(path), resume(path, tmp_path)
        own = data[data["algo"]]["actor"]
        assert cfg.actor.lr == own["lr"] != TrainConfig().actor.lr
        assert cfg.actor.updates == own["updates"]
        if data["algo"] == "digirl":
            assert cfg.critic.lr == data["digirl"]["critic"]["lr"]


def test_a_retired_value_other_than_todays_is_named_in_one_line(tmp_path, caplog) -> None:
    caplog.set_level(logging.WARNING)
    resume(DATA / "00-5bdcd35" / "full.yaml", tmp_path)
    lines = [r.getMessage() for r in caplog.records]
    assert (
        "digirl.advantage_sample=256 saved by an older version is not an option any more; 0 is used"
        in lines
    )


def test_the_learner_shards_of_a_run_without_a_league_make_no_learner_group(tmp_path) -> None:
    path = DATA / "36-2ea72af" / "full.yaml"
    data = saved(path)
    data["policies"] = {}
    data["league"]["learner_shards"] = 4
    solo = tmp_path / "solo.yaml"
    solo.write_text(yaml.safe_dump(data))
    assert resume(solo, tmp_path).learner.num_workers == 1
    data["policies"] = saved(DATA / "36-2ea72af" / "league-example.yaml")["policies"]
    league = tmp_path / "league.yaml"
    league.write_text(yaml.safe_dump(data))
    assert resume(league, tmp_path).learner.num_workers == 4


def test_the_other_learners_actor_options_are_not_applied(tmp_path) -> None:
    """A DigiRL run saved ``filtered_bc.actor`` too (at its defaults or not): never read."""
    data = saved(DATA / "28-715ef03" / "full.yaml")
    data["filtered_bc"]["actor"]["lr"] = 0.5
    data["digirl"]["actor"]["lr"] = 0.003
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    assert resume(path, tmp_path).actor.lr == 0.003


def test_the_ablation_switches_become_selection_steps(tmp_path) -> None:
    data = saved(DATA / "28-715ef03" / "full.yaml")
    data["digirl"].update(step_filter=False, rehearse=3, rehearse_share=0.5)
    data["digirl"]["actor"]["skip_noops"] = True
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    cfg = resume(path, tmp_path)
    assert cfg.digirl.selection == ["curriculum", "rehearsal", "skip_noops"]
    assert (cfg.digirl.rehearsal.per_task, cfg.digirl.rehearsal.share) == (3, 0.5)
    data["digirl"]["critics"] = False  # no critics: top-p by return, every step
    path.write_text(yaml.safe_dump(data))
    cfg = resume(path, tmp_path)
    assert cfg.algo == "filtered_bc" and cfg.filtered_bc.top_p == data["digirl"]["top_p"]
    assert cfg.filtered_bc.selection == ["top_p_by_return", "skip_noops"]


#: Malformed values for the retired options of the oldest and the newest older layouts.
BAD = ["x", [1, 2], {"a": 1}, -3]
TODAY = {key for key, *_ in config_options(TrainConfig)}
RETIRED_KEYS = [
    (layout, key)
    for layout in ("28-715ef03", "31-b8f075c", "36-2ea72af")
    for key in sorted(set(leaves(saved(DATA / layout / "full.yaml"))) - TODAY)
    if not key.startswith("policies.")
]


def test_malformed_retired_values_give_one_line_never_a_traceback(tmp_path) -> None:
    """Every option an older layout has and today's has not, saved as a string, a list, a
    mapping or a negative number: the resume works (the value meant nothing now) or stops
    with a `ConfigError` naming a key."""
    assert len(RETIRED_KEYS) > 150
    for layout, key in RETIRED_KEYS:
        data = saved(DATA / layout / "full.yaml")
        for bad in BAD:
            node = data
            *parents, last = key.split(".")
            for part in parents:
                node = node[part]
            node[last] = bad
            path = tmp_path / "c.yaml"
            path.write_text(yaml.safe_dump(data))
            try:
                resume(path, tmp_path)
            except ConfigError as e:
                assert "\n" not in str(e)
            except Exception as e:  # pragma: no cover - the failure this test is for
                pytest.fail(f"{layout} {key}={bad!r}: {type(e).__name__}: {e}")


def test_resume_of_a_malformed_older_run_is_one_line_on_the_command_line(tmp_path, capsys):
    data = saved(DATA / "28-715ef03" / "full.yaml")
    data["digirl"]["rehearse"] = "often"
    run = RunDir(tmp_path / "run").create()
    run.config_path.write_text(yaml.safe_dump(data))
    r = cli(capsys, "train", "--resume", run.path, "--print-config")
    assert "digirl.rehearse" in r.one_line()
