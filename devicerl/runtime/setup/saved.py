"""Run configs older versions saved (``RUN/config.yaml``), carried to today's layout so a run
folder of any landed version resumes with the same meaning.

`upgrade_run_config` applies each landed change of the run options in order, oldest first, to
the run and to each league policy: an option renamed or merged moves with its value (the
learning rates the actor and the critic once kept under ``digirl.`` / ``filtered_bc.``, the
ablation switches that became selection steps, ``0`` for "none" that became ``null``, the
device's options saved as the free mapping ``env.kwargs`` that are ``env.options`` now); an option
that became a constant is dropped, and a saved value other than the one the code now uses is
logged in one line naming it (`devicerl.config.retire`). An option moves only where it meant
something: ``filtered_bc.actor`` of a DigiRL run was never read, ``league.learner_shards`` of a
run without a league made no learner group. A malformed value that has to be read to be carried
over is a `ConfigError` naming its key; anything else, unknown keys included, is left for the
loader to check. ``tests/data/saved_configs/`` holds a saved config of every landed layout.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from devicerl.agents.config import upgrade_saved_agent
from devicerl.agents.saved import upgrade_older_agent
from devicerl.config import (
    IGNORED,
    REDACTED,
    drop_retired,
    retire,
    saved_flag,
    saved_move,
    saved_number,
    saved_pop,
    saved_put,
    saved_section,
    used_only,
)
from devicerl.errors import ConfigError

log = logging.getLogger(__name__)

#: The learners that kept their own actor options (``digirl.actor``, ``filtered_bc.actor``).
OWN_ACTOR = ("digirl", "filtered_bc")
#: Actor options that moved from the learner's section to ``actor`` with their meaning.
ACTOR_MOVED = ("lr", "updates", "batch_size", "grad_accum", "loss_floor", "grad_clip")
#: Actor options that are gone, with the value the code now uses.
ACTOR_RETIRED = {
    "weight_decay": 0.0,
    "balance_tasks": False,
    "drop_loops": False,
    "max_epochs": 0.0,
    "lr_versions": 0,  # a constant learning rate (``lr_final`` then meant nothing)
    "lr_final": IGNORED,
}
#: The critics' options that moved from ``digirl.critic`` to ``critic``.
CRITIC_MOVED = ("lr", "batch_size", "d_model", "instruction_updates", "step_updates", "grad_clip")
#: DigiRL's options that are gone (`devicerl.algos.critic_fit` holds the held-out share and the
#: critics' clip and depth).
DIGIRL_RETIRED = {
    "digirl.critic.n_layers": 2,
    "critic.grad_clip": 1.0,
    "digirl.advantage_sample": 0,
    "digirl.step_value_target": "success",
    "digirl.gamma": IGNORED,  # the discount of step_value_target mc_return only
    "digirl.heldout_every": 10,
    "digirl.keep_demonstration_steps": False,
}
#: Options of the run as a whole that are gone, with the value the code now uses.
RUN_RETIRED: dict[str, Any] = {
    "torch_threads": 1,
    "max_policy_lag": None,
    "max_ahead": 0,
    "keep_checkpoints": 3,
    "eval.seed": 10_000,
    "eval.policy": "",
    "eval.league": "",
    "exploration.probe_greedy": False,
    "gigpo.step_weight": 1.0,
    "learner.cpus_per_worker": 1.0,
    "learner.setup_timeout_s": 300.0,
    "learner.backend": "auto",
    "rollouts.poll_s": 0.5,
    "rollouts.ledger": "",
    "logging.run_name": None,
    "logging.wandb_entity": None,
    "logging.wandb_mode": "online",
}
#: The VLM judge's options that became constants (`devicerl.judges.vlm`, `ChatClient`); they
#: meant something only to a run judged by a VLM.
VLM_JUDGE_RETIRED = {
    "judge.on_unknown": "drop",
    "judge.chat.max_retries": 4,
    "judge.chat.backoff_s": 1.0,
    "judge.chat.backoff_max_s": 30.0,
    "judge.chat.burst": 1,
    "judge.chat.temperature": 0.0,
    "judge.chat.max_tokens": 512,
    "judge.vlm.last_k": 3,
    "judge.vlm.max_actions": 20,
    "judge.vlm.image_format": "png",
    "judge.vlm.max_side": 0,
    "judge.vlm.system_prompt": "",
    "judge.workers": 0,  # 0: as many as chat.max_concurrency, what a VLM judge has now
}
#: The league's options that became constants (`devicerl.league.config`).
LEAGUE_RETIRED = {
    "league.snapshot.max_per_policy": 3,
    "league.snapshot.gate_margin": 0.1,
    "league.frontier.window": 20,
    "league.pbt.quantile": 0.25,
    "league.pbt.resample_probability": 0.25,
    "league.pbt.perturbation": [0.8, 1.2],
    "league.pbt.seed": 0,
    "league.pbt.hyperparams": {
        "actor_lr": [1e-5, 1e-3],
        "top_p": [0.05, 0.5],
        "epsilon": [0.0, 0.3],
    },
}
#: Options where 0 (or the empty string) once meant "none" and null means it now.
NONE_WAS_ZERO = (
    "max_iterations",
    "max_policy_lag",
    "offline_data",
    "exploration.max",
    "exploration.probe",
    "judge.chat.requests_per_minute",
)


def upgrade_run_config(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data``, a saved run config read as nested mappings, in today's layout."""
    out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in data.items()}
    league = bool(out.get("policies"))
    _learner(out, out.get("algo", "digirl"), "")
    policies = out.get("policies")
    if isinstance(policies, Mapping):
        out["policies"] = {
            name: _policy(spec, f"policies.{name}.") for name, spec in policies.items()
        }
    for key in NONE_WAS_ZERO:
        _zero_is_none(out, key)
    _run_options(out, league)
    if isinstance(out.get("agent"), Mapping):
        out["agent"] = _agent(out["agent"], "agent.")
    return out


def _policy(spec: Any, where: str) -> Any:
    if not isinstance(spec, Mapping):
        return spec
    spec = {k: dict(v) if isinstance(v, Mapping) else v for k, v in spec.items()}
    _learner(spec, spec.get("algo", "digirl"), where)
    if isinstance(spec.get("agent"), Mapping):
        spec["agent"] = _agent(spec["agent"], f"{where}agent.")
    return spec


def _agent(agent: Mapping[str, Any], where: str) -> dict[str, Any]:
    return upgrade_saved_agent(upgrade_older_agent(agent, where))


def _zero_is_none(out: dict[str, Any], key: str) -> None:
    found, value = saved_pop(out, key)
    if found:
        saved_put(out, key, None if value in (0, "") and value is not False else value)


# -- the learner: a run's own, and each league policy's ----------------------------------------
def _learner(sec: dict[str, Any], algo: Any, where: str) -> None:
    """The learner's options of one run or policy (``sec``) that learns with ``algo``."""
    for name in OWN_ACTOR:
        _own_actor(sec, name, algo == name, where)
    for key in CRITIC_MOVED:
        saved_move(sec, f"digirl.critic.{key}", f"critic.{key}")
    _zero_is_none(sec, "actor.grad_clip")
    digirl = algo == "digirl"
    drop_retired(sec, used_only(DIGIRL_RETIRED, digirl), where)
    _drop_empty(sec, "digirl.critic")
    _rehearsal(sec, digirl, where)
    _selection(sec, algo, where)
    critic = saved_section(sec, "critic")
    if critic is not None and {"instruction_updates", "step_updates"} & set(critic):
        counts = [
            saved_number(f"{where}critic.{k}", critic.pop(k), int)
            for k in ("instruction_updates", "step_updates")
            if k in critic
        ]
        critic.setdefault("updates", max(counts))


def _own_actor(sec: dict[str, Any], name: str, used: bool, where: str) -> None:
    """``NAME.actor`` of the learner ``name``: its options moved to ``actor`` (where the run
    learned with it), its entropy weight and fade became ``actor.entropy``."""
    key = f"{name}.actor"
    if saved_section(sec, key) is None:
        return
    for option in (*ACTOR_MOVED, "skip_noops"):
        found, value = saved_pop(sec, f"{key}.{option}")
        if found and used:
            saved_put(sec, f"actor.{option}", value)
    coef = saved_pop(sec, f"{key}.entropy_coef")[1]
    fade = saved_pop(sec, f"{key}.entropy_versions")[1]
    if used and coef is not None and saved_number(f"{where}{key}.entropy_coef", coef) > 0:
        fade = saved_number(f"{where}{key}.entropy_versions", fade or 0, int)
        saved_put(sec, "actor.entropy", {"coef": coef, "fade_versions": fade or None})
    retired = {f"{key}.{k}": v for k, v in ACTOR_RETIRED.items()}
    drop_retired(sec, used_only(retired, used), where)
    _drop_empty(sec, key)


def _drop_empty(sec: dict[str, Any], key: str) -> None:
    """Remove the section at ``key`` once nothing is left in it."""
    found, value = saved_pop(sec, key)
    if found and value:
        saved_put(sec, key, value)  # a key no version had: the loader names it


def _rehearsal(sec: dict[str, Any], digirl: bool, where: str) -> None:
    """``digirl.rehearse`` (a count, 0: off) and ``rehearse_share`` / ``_pick`` / ``_whole``
    became the ``rehearsal`` block (null: off); ``rehearse_weight`` a constant 1."""
    d = saved_section(sec, "digirl")
    if d is None or not {"rehearse", "rehearse_share"} & set(d):
        return
    count = saved_number(f"{where}digirl.rehearse", d.pop("rehearse", 0), int)
    share = saved_number(f"{where}digirl.rehearse_share", d.pop("rehearse_share", 0.0))
    pick, whole = d.pop("rehearse_pick", "advantage"), d.pop("rehearse_whole", False)
    on = digirl and (count > 0 or share > 0)
    retire(d, "rehearse_weight", 1.0 if on else IGNORED, f"{where}digirl.")
    if on:
        d["rehearsal"] = {"per_task": max(1, count), "share": share or None, "pick": pick,
                          "whole": whole}  # fmt: skip
    else:
        d["rehearsal"] = None


def _selection(sec: dict[str, Any], algo: Any, where: str) -> None:
    """Before the learners listed their selection steps: DigiRL's ablation switches
    (``curriculum``, ``step_filter``; ``critics: false`` was Filtered BC), its ``rehearsal``
    block, and ``actor.skip_noops`` of either learner."""
    d, f = saved_section(sec, "digirl"), saved_section(sec, "filtered_bc")
    if (d is None or "selection" in d) and (f is None or "selection" in f):
        return
    skip = saved_flag(f"{where}actor.skip_noops", saved_pop(sec, "actor.skip_noops")[1] or False)
    noops = ["skip_noops"] if skip else []
    if d is not None and "selection" not in d:
        switches = {k: saved_flag(f"{where}digirl.{k}", d.pop(k, True))
                    for k in ("curriculum", "step_filter", "critics")}  # fmt: skip
        rehearsal = d.pop("rehearsal", None)
        if rehearsal is not None and not isinstance(rehearsal, Mapping):
            raise ConfigError(f"{where}digirl.rehearsal: {rehearsal!r} is not a mapping")
        steps = ["curriculum"] if switches["curriculum"] else []
        if rehearsal and switches["curriculum"]:  # rehearsal joined the curriculum's picks
            steps.append("rehearsal")
            d["rehearsal"] = rehearsal
        steps += ["step_filter"] if switches["step_filter"] else []
        d["selection"] = steps + (noops if algo == "digirl" else [])
        if algo == "digirl" and not switches["critics"]:  # top-p by return, every step
            sec["algo"] = algo = "filtered_bc"
            saved_put(sec, "filtered_bc.top_p", d.get("top_p", 0.1))
            f = saved_section(sec, "filtered_bc")
    if f is not None and "selection" not in f:
        f["selection"] = ["top_p_by_return"] + (noops if algo == "filtered_bc" else [])


# -- the run as a whole --------------------------------------------------------------------------
def _run_options(out: dict[str, Any], league: bool) -> None:
    saved_move(out, "league.pbt.hyperparams.explore", "league.pbt.hyperparams.epsilon")
    drop_retired(out, RUN_RETIRED)
    vlm_judged = (saved_section(out, "judge") or {}).get("kind") == "vlm"
    drop_retired(out, used_only(VLM_JUDGE_RETIRED, vlm_judged))
    drop_retired(out, used_only(LEAGUE_RETIRED, league))
    found, enabled = saved_pop(out, "league.frontier.enabled")
    if found and not saved_flag("league.frontier.enabled", enabled):
        out["league"]["frontier"] = None  # frontier sampling off: uniform over the tasks
    _logging(out)
    _rollouts(out)
    _learners(out, league)
    _devices(out)


def _logging(out: dict[str, Any]) -> None:
    """``logging.wandb`` became: a project name turns W&B on."""
    found, wandb = saved_pop(out, "logging.wandb")
    if found and not saved_flag("logging.wandb", wandb):
        out["logging"]["wandb_project"] = None


def _rollouts(out: dict[str, Any]) -> None:
    """A group's ``num_cpus`` / ``num_gpus`` became ``CPU`` / ``GPU`` of its Ray resources."""
    rollouts = saved_section(out, "rollouts")
    if rollouts is None or not {"num_cpus", "num_gpus"} & set(rollouts):
        return
    resources = rollouts.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise ConfigError(f"rollouts.resources: {resources!r} is not a mapping")
    resources = dict(resources)
    for key, name, default in (("num_cpus", "CPU", 1.0), ("num_gpus", "GPU", 0.0)):
        if key in rollouts and (amount := rollouts.pop(key)) != default:
            resources[name] = saved_number(f"rollouts.{key}", amount)
    rollouts["resources"] = resources


def _learners(out: dict[str, Any], league: bool) -> None:
    """``learner.num_workers: 0`` meant one learner in the trainer (1 now); a league's
    ``league.learner_shards`` became its ``learner.num_workers``; without a league no learner
    read it."""
    learner = saved_section(out, "learner")
    if learner is not None and learner.get("num_workers") == 0:
        learner["num_workers"] = 1
    found, shards = saved_pop(out, "league.learner_shards")
    if found and league and saved_number("league.learner_shards", shards or 0, int) > 1:
        saved_put(out, "learner", {})
        out["learner"]["num_workers"] = int(shards)


# -- the devices ---------------------------------------------------------------------------------
def _devices(out: dict[str, Any]) -> None:
    """``env.kwargs`` (a free mapping) became ``env.options`` (the device's options dataclass),
    with MiniWoB++'s options out of ``suite_options`` and the emulator console's token file
    under a name that is not redacted as a secret when saved (a redacted one reads as the
    default)."""
    saved_move(out, "env.kwargs", "env.options")
    options = saved_section(out, "env.options")
    if options is None:
        return
    _lift_suite_options(options)
    if "emulator_console_token" in options:
        path = options.pop("emulator_console_token")
        if path == REDACTED:
            log.warning("env.options.emulator_console_token was saved redacted; the default "
                        "token file is used")  # fmt: skip
        else:
            options.setdefault("emulator_console_token_file", path)


def _lift_suite_options(options: dict[str, Any]) -> None:
    """MiniWoB++'s options saved in ``suite_options`` become device options; anything else
    there is left for the loader to name."""
    suites = options.pop("suite_options", None)
    rest = dict(suites) if isinstance(suites, Mapping) else suites
    for suite in ("miniwob", "webskills"):
        lifted = rest.get(suite) if isinstance(rest, dict) else None
        if isinstance(lifted, Mapping):
            del rest[suite]  # type: ignore[union-attr]
            options.update({k: v for k, v in lifted.items() if k not in options})
    if rest:
        options["suite_options"] = rest
