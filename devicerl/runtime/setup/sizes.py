"""Sizes checked before anything starts: against the run's budget (a group that can never
complete) and against this machine's memory (what the replay, the minibatches and a population
of agents would take). A size that cannot fit is one `ConfigError` line naming the option and
the bound; the run folder is not created.

The memory figures are estimates, high rather than low, of what the run holds at its largest:
`STEP_BYTES` per step in the replay (a 210 x 160 RGB screen decoded, its elements and action),
the small agent's parameters with their gradients and AdamW moments per population member, and
its transformer's activations per minibatch sample. Agents of other kinds count their folder's
bytes four times over (weights, gradients, two moments); their minibatches are not estimated (a
GPU's memory is theirs).
"""

from __future__ import annotations

from pathlib import Path

from devicerl.agents.config import FeatureConfig, SmallAgentConfig
from devicerl.agents.factory import AgentSpec
from devicerl.algos.config import GROUP_MAX_AGE
from devicerl.errors import ConfigError
from devicerl.runtime.setup.config import TrainConfig

#: Bytes one step of an episode takes in memory (screen, elements, action), at most.
STEP_BYTES = 128 << 10
#: Bytes per trained parameter: fp32 weights, gradients and AdamW's two moments.
TRAINING_BYTES_PER_PARAM = 16
#: Bytes a device takes: a browser page with its share of Chromium (docs: ~170-390 MiB), any
#: other device's state; and a worker process of its own (Python with devicerl imported).
DEVICE_BYTES = {"browser": 256 << 20, "other": 16 << 20}  # other: synthetic, android (ADB)
WORKER_BYTES = 96 << 20


def available_memory() -> int:
    """Bytes this machine can still give a run (``MemAvailable``; all of it where unknown)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    import os

    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_sizes(
    cfg: TrainConfig, offline_steps: int, episode_steps: int, memory: int | None = None
) -> None:
    """Raise `ConfigError` for a size the run's budget or ``memory`` (bytes; default: what
    this machine has free) cannot hold. ``offline_steps``: the steps of its offline data;
    ``episode_steps``: the longest episode its training tasks allow."""
    memory = available_memory() if memory is None else memory
    _devices(cfg, memory)
    _groups(cfg)
    _replay(cfg, offline_steps, episode_steps, memory)
    _minibatches(cfg, memory)
    _population(cfg, memory)


def _gib(n: float) -> str:
    return f"{n / (1 << 30):.1f} GiB"


def _devices(cfg: TrainConfig, memory: int) -> None:
    """``env.num_envs`` devices, each in a worker process of its own unless serial (web pages
    in a browser unless the device is synthetic or a phone over ADB)."""
    light = cfg.env.name.split("/")[0] in ("synthetic", "android")
    each = DEVICE_BYTES["other" if light else "browser"]
    each += WORKER_BYTES if cfg.env.worker != "serial" else 0
    need = cfg.env.num_envs * each
    if need > memory:
        raise ConfigError(
            f"env.num_envs={cfg.env.num_envs}: that many devices take about {_gib(need)} and "
            f"this machine has {_gib(memory)} free"
        )


def _groups(cfg: TrainConfig) -> None:
    """A group-relative learner learns from whole groups only: ``group_size`` episodes of one
    instance (each at least one step) must fit in the budget, and arrive before the trainer
    gives up on the group (`GROUP_MAX_AGE` iterations of ``trajectories_per_iter``)."""
    size = cfg.group_size
    if size is None or cfg.mode not in ("online", "off2on"):
        return
    if size > cfg.env_steps:
        raise ConfigError(
            f"grpo.group_size={size}: a group is {size} episodes of at least one step each, "
            f"and env_steps={cfg.env_steps} cannot complete one (no update would ever happen)"
        )
    most = cfg.trajectories_per_iter * GROUP_MAX_AGE
    if size > most:
        raise ConfigError(
            f"grpo.group_size={size}: a group not whole within {GROUP_MAX_AGE} iterations of "
            f"trajectories_per_iter={cfg.trajectories_per_iter} is dropped: at most {most}"
        )


def _replay(cfg: TrainConfig, offline_steps: int, episode_steps: int, memory: int) -> None:
    """The replay holds at most every step the run collects and loads, and at most
    ``replay_capacity`` episodes of the longest length."""
    if cfg.mode == "eval":
        return
    steps = offline_steps + (cfg.env_steps if cfg.mode in ("online", "off2on") else 0)
    steps = min(steps, cfg.replay_capacity * episode_steps)
    need = steps * STEP_BYTES
    if need > memory:
        raise ConfigError(
            f"replay_capacity={cfg.replay_capacity}: the replay could hold {steps} steps, about "
            f"{_gib(need)}, and this machine has {_gib(memory)} free: lower replay_capacity, "
            "env_steps or tasks.max_steps, or load less offline_data"
        )


def _small(agent: AgentSpec) -> SmallAgentConfig | None:
    """The architecture of a new small agent the run builds, else None."""
    if agent.kind != "small" or agent.path is not None:
        return None
    return agent.small.architecture(agent.seed)


def _sample_bytes(arch: SmallAgentConfig) -> int:
    """Activation bytes of one minibatch sample through the small agent (forward and
    backward): attention maps and a dozen tensors of the width per layer and token."""
    f: FeatureConfig = arch.features
    tokens = f.max_instr_tokens + f.max_elements + arch.n_cells
    per_layer = arch.n_heads * tokens * tokens + 12 * tokens * arch.d_model
    return 4 * arch.n_layers * per_layer


def _minibatches(cfg: TrainConfig, memory: int) -> None:
    arch = _small(cfg.agent)
    if arch is None or cfg.algo == "none" or cfg.mode == "eval":
        return
    for key, size in (("actor.batch_size", cfg.actor.batch_size),
                      ("critic.batch_size", cfg.critic.batch_size)):  # fmt: skip
        need = size * _sample_bytes(arch)
        if need > memory:
            raise ConfigError(
                f"{key}={size}: one minibatch takes about {_gib(need)} through the small agent "
                f"and this machine has {_gib(memory)} free"
            )


def _agent_bytes(agent: AgentSpec) -> int:
    """Memory to train one copy of ``agent``."""
    arch = _small(agent)
    if arch is not None:
        params = arch.features.buckets * arch.d_model + 28 * arch.d_model * arch.d_model
        return params * TRAINING_BYTES_PER_PARAM
    folder = Path(agent.path or "")
    files = [p for p in folder.rglob("*") if p.is_file()] if folder.is_dir() else []
    return 4 * sum(p.stat().st_size for p in files)


def _population(cfg: TrainConfig, memory: int) -> None:
    """PBT trains ``population`` copies of one policy side by side."""
    pbt = cfg.league.pbt
    spec = cfg.policies.get(pbt.policy) if pbt.policy else None
    if spec is None:
        return
    need = pbt.population * _agent_bytes(spec.agent)
    if need > memory:
        raise ConfigError(
            f"league.pbt.population={pbt.population}: that many copies of {pbt.policy} take "
            f"about {_gib(need)} to train and this machine has {_gib(memory)} free"
        )
