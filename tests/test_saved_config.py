"""A run folder saved by an older version resumes: `TrainConfig.upgrade_saved` carries merged
options over to their successors and drops removed ones, and `RunDir.load_config` applies it."""

from __future__ import annotations

import yaml

from devicerl.runtime.runs.folder import RunDir
from devicerl.runtime.setup.config import TrainConfig

#: The options an older version wrote into ``config.yaml`` that are gone or merged now.
OLD = {
    "torch_threads": 1,
    "max_policy_lag": None,
    "logging": {"tensorboard": False, "wandb": False, "wandb_project": "devicerl"},
    "critic": {"lr": 3.0e-3, "instruction_updates": 2, "step_updates": 2},
    "rollouts": {"groups": 0, "num_cpus": 0.25, "num_gpus": 0.0, "resources": {}, "ledger": ""},
    "gigpo": {"step_weight": 1.0, "gamma": 0.9},
    "judge": {"on_unknown": "drop", "chat": {"model": "m", "max_retries": 4},
              "vlm": {"last_k": 3, "few_shot": ""}},
    "league": {"learner_shards": 2, "generalist": ""},
    "agent": {
        "kind": "small",
        "small": {"n_layers": 2, "temperature": 1.0, "swipes": False, "point_actions": True,
                  "page_text": False, "free_text": False, "pixels": True, "field_labels": False},
        "api": {"include_screenshot": True, "chat": {"max_retries": 4}, "history": 4,
                "include_elements": True, "temperature": 0.0},
    },
}  # fmt: skip


def test_an_older_run_config_loads_with_the_same_meaning(tmp_path) -> None:
    run = RunDir(tmp_path / "run").create()
    run.config_path.write_text(yaml.safe_dump(OLD))
    cfg = run.load_config(TrainConfig, ["env_steps=40"])
    assert cfg.env_steps == 40 and cfg.critic.updates == 2 and cfg.critic.lr == 3.0e-3
    assert cfg.logging.wandb_project is None  # W&B was off
    assert cfg.rollouts.actor_options()["num_cpus"] == 0.25 and cfg.gigpo.gamma == 0.9
    assert cfg.learner.num_workers == 1  # no league: its shards made no learner group
    assert cfg.judge.chat.model == "m"
    arch = cfg.agent.small.architecture()
    assert not arch.swipes and arch.point_actions and arch.features.pixels


def test_w_and_b_stays_on_for_a_run_that_had_it() -> None:
    data = TrainConfig.upgrade_saved({"logging": {"wandb": True, "wandb_project": "p"}})
    assert data["logging"] == {"wandb_project": "p"}
