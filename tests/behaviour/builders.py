"""The shipped single-policy setups rebuilt as a run builds them, and what each decides on the
fixed dataset (`tests.behaviour.dataset`): actions, log-probs, one learner update.

A setup is a config in ``configs/`` loaded with the project's loader (`load_config`, what
``devicerl train --config`` does), its agent from ``cfg.agent.make()`` and its learner from
`make_learner`, every seed fixed as the trainer fixes it (`seed_everything(cfg.seed)` first,
the actor's version at the run's 0). The records:

- ``act``: `Policy.act` on 16 observations of the dataset (each with its episode's earlier
  actions, as the collector passes them), sampled from a fixed seed and greedy; for a setup
  with success-adaptive exploration also sampled at the exploration level ``exploration.max``
  (``epsilon``, as the collector asks for it). Actions in their JSON codec form.
- ``log_prob``: `Policy.log_prob` of every stored step's action on the observation the learner
  sees (`Trajectory.agent_observation`), with and without the exploration floor, and as the
  policy acted (floor on, at the episode plan's ``epsilon``).
- ``update``: one ``learner.update(dataset)`` from a freshly built agent and learner: its
  metrics, the steps the actor's regression was given (trajectory index, step index, weight 1;
  in the order the selection handed them out) and the parameter deltas of the actor and of the
  critics (`tests.behaviour.summary.delta_summary`).

When the training loop's API changes, this module is what changes with it: the records it
returns must stay equal to the committed fixtures.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from devicerl.config import load_config
from devicerl.records import Observation, Trajectory
from devicerl.runtime.setup.config import TrainConfig
from devicerl.runtime.setup.learners import make_learner, seed_everything

from .dataset import trajectories
from .summary import delta_summary, jsonable, one_thread, snapshot

ROOT = Path(__file__).resolve().parents[2]
PRETRAINED = "benchmarks/agents/webskills-labels-2026-11-27"
#: name -> (config file, overrides), every shipped setup of both algorithms.
SETUPS: dict[str, tuple[str, list[str]]] = {
    f"{algo}-{setup}": (
        f"configs/miniwob-{algo}-{setup}.yaml",
        [f"agent.path={PRETRAINED}"] if setup == "pretrained" else [],
    )
    for algo in ("digirl", "filteredbc")
    for setup in ("paper", "tuned", "pretrained")
}
#: Seed of the sampled `act` calls (the agent's sampling generator and torch's).
ACT_SEED = 1234
#: Observations `act` is recorded on, and the batch size of the recorded `log_prob` calls.
N_ACT = 16
LOG_PROB_BATCH = 16


def load_setup(name: str) -> TrainConfig:
    """The setup's `TrainConfig`, loaded as ``devicerl train --config FILE OVERRIDES`` does
    (paths made absolute, so the current directory does not matter)."""
    path, overrides = SETUPS[name]
    absolute = [_absolute(o) for o in overrides]
    return load_config(TrainConfig, ROOT / "devicerl" / path, absolute)  # shipped in the package


def _absolute(override: str) -> str:
    key, value = override.split("=", 1)
    return f"{key}={ROOT / value}" if key == "agent.path" else override


def build_agent(cfg: TrainConfig) -> Any:
    """The agent as the trainer builds it: seeded, at the run's version 0 (not a saved
    agent's own count)."""
    seed_everything(cfg.seed)
    agent = cfg.agent.make()
    agent.version = 0
    return agent


def build(cfg: TrainConfig) -> tuple[Any, Any]:
    """(agent, learner) as the trainer builds them."""
    agent = build_agent(cfg)
    return agent, make_learner(cfg, agent)


def dataset() -> list[Trajectory]:
    return trajectories()


def act_observations(data: Sequence[Trajectory]) -> list[Observation]:
    """`N_ACT` observations spread over the dataset, each as the collector hands it to the
    policy (with its episode's earlier actions)."""
    out = []
    for i in range(N_ACT):
        t = data[(i * 7) % len(data)]
        out.append(t.agent_observation(i % t.length))
    return out


def _reseed(agent: Any, seed: int) -> None:
    torch.manual_seed(seed)
    generator = getattr(agent, "generator", None)
    if generator is not None:
        generator.manual_seed(seed)


def _samples(samples: Sequence[Any]) -> list[dict[str, Any]]:
    return [{"action": s.action.to_dict(), "log_prob": float(s.log_prob)} for s in samples]


def record_act(cfg: TrainConfig, agent: Any, data: Sequence[Trajectory]) -> dict[str, Any]:
    observations = act_observations(data)
    out: dict[str, Any] = {}
    _reseed(agent, ACT_SEED)
    out["sampled"] = _samples(agent.act(observations))
    out["greedy"] = _samples(agent.act(observations, greedy=True))
    level = cfg.exploration.max
    if level is not None:
        _reseed(agent, ACT_SEED)
        epsilon = [level] * len(observations)
        out[f"sampled_explore_{level}"] = _samples(agent.act(observations, epsilon=epsilon))
    return out


def _log_probs(
    agent: Any,
    observations: list[Observation],
    steps: list[Any],
    epsilon: list[float | None] | None = None,
    **kw: Any,
) -> list[float]:
    out: list[float] = []
    with torch.no_grad():
        for i in range(0, len(steps), LOG_PROB_BATCH):
            obs = observations[i : i + LOG_PROB_BATCH]
            batch = steps[i : i + LOG_PROB_BATCH]
            actions, texts = [s.action for s in batch], [s.text for s in batch]
            levels = epsilon[i : i + LOG_PROB_BATCH] if epsilon is not None else None
            if levels is not None and any(v is not None for v in levels):
                # rows of episodes without a plan act at the agent's own floor (level 0)
                kw = {**kw, "epsilon": [v or 0.0 for v in levels]}
            elif "epsilon" in kw:
                kw = {k: v for k, v in kw.items() if k != "epsilon"}
            lp = agent.log_prob(obs, actions, texts, **kw)
            out.extend(float(v) for v in lp)
    return out


def record_log_probs(agent: Any, data: Sequence[Trajectory]) -> dict[str, list[float]]:
    steps = [s for t in data for s in t.steps]
    learner_view = [t.agent_observation(i) for t in data for i in range(t.length)]
    levels = [t.plan.epsilon if t.plan else None for t in data for _ in range(t.length)]
    return {
        "floor": _log_probs(agent, learner_view, steps, floor=True),
        "no_floor": _log_probs(agent, learner_view, steps, floor=False),
        "acting": _log_probs(agent, learner_view, steps, levels, floor=True),
    }


def step_index(data: Sequence[Trajectory]) -> dict[int, tuple[int, int]]:
    """id(step) -> (trajectory index, step index) in ``data`` (a selection may hand out a copy
    of a trajectory, e.g. without its loops, but never copies of its steps)."""
    return {id(s): (ti, si) for ti, t in enumerate(data) for si, s in enumerate(t.steps)}


def capture_selection(learner: Any, data: Sequence[Trajectory]) -> list[list[Any]]:
    """Wraps the actor's regression step so the samples it is given are written, as
    [trajectory index, step index, weight], into the returned list."""
    where = step_index(data)
    kept: list[list[Any]] = []
    step = learner.regression.step

    def recording(samples: Sequence[Any], trajs: Sequence[Trajectory]) -> Any:
        for s in samples:
            ti, si = where[id(s.trajectory.steps[s.index])]
            kept.append([ti, si, 1.0])
        return step(samples, trajs)

    learner.regression.step = recording
    return kept


def parameters(agent: Any, learner: Any) -> dict[str, torch.Tensor]:
    """The actor's trainable parameters and the learner's other modules' (critics), by name
    (``actor.``, ``instr_critic.``, ``step_critic.`` prefixes)."""
    named = {f"actor.{k}": v for k, v in agent.named_trainable().items()}
    for key, module in learner.modules().items():
        named.update({f"{key}.{k}": v for k, v in module.named_parameters()})
    return named


def record_update(
    cfg: TrainConfig, data: Sequence[Trajectory], built: tuple[Any, Any] | None = None
) -> dict[str, Any]:
    """One ``learner.update(data)`` from a fresh build (or ``built``), torch's and the
    learner's seeds fixed first."""
    agent, learner = built or build(cfg)
    seed_everything(cfg.seed)
    kept = capture_selection(learner, data)
    before = snapshot(parameters(agent, learner))
    metrics = learner.update(list(data))
    after = parameters(agent, learner)
    return {"metrics": metrics, "selection": kept, "deltas": delta_summary(before, after)}


def record_setup(name: str) -> dict[str, Any]:
    """Everything recorded for one shipped setup (JSON-ready)."""
    path, overrides = SETUPS[name]
    with one_thread():
        cfg = load_setup(name)
        data = dataset()
        agent = build_agent(cfg)
        out = {
            "setup": name,
            "config": path,
            "overrides": overrides,
            "act": record_act(cfg, agent, data),
            "log_prob": record_log_probs(agent, data),
            "update": record_update(cfg, data),
        }
    return jsonable(out)
