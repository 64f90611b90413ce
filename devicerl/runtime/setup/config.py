"""The configuration of `devicerl train` and `devicerl eval` (YAML <-> these dataclasses).

Every field's help text is what ``devicerl train --help`` prints. Ready-made configs for each
mode and algorithm live in the package's ``devicerl/configs/`` folder.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from devicerl.agents.factory import AgentSpec
from devicerl.algos.config import (
    ActorConfig,
    CriticConfig,
    DigiRLConfig,
    FilteredBCConfig,
    GiGPOConfig,
    GRPOConfig,
)
from devicerl.envs.registry import EnvSpec, option_kinds, options_type, read_options
from devicerl.errors import ConfigError
from devicerl.judges.config import JudgeConfig
from devicerl.league.config import LeagueConfig, PolicySpec, validate_league
from devicerl.pool.supervisor import SupervisorConfig
from devicerl.runtime.runs.metrics import LoggingConfig

if TYPE_CHECKING:
    from devicerl.pool.pool import EnvPool
    from devicerl.tasks import TaskSampler


_SUPERVISOR = SupervisorConfig()


@dataclass
class EnvConfig:
    """The devices: which kind (``name``) and its options, a dataclass per kind
    (`devicerl.envs.registry`), read by the same loader as every other option."""

    name: str = field(
        default="browser",
        metadata={
            "help": "device: browser, synthetic, android, or one named after a task suite "
            "(miniwob, miniwob/TASK, synthetic/TASK, ...); its options go in env.options"
        },
    )
    options: Any = field(
        default=None,
        metadata={
            "help": "the options of the device env.name names (listed per device), e.g. "
            "{screenshot: false}",
            "type_from": ("name", options_type),
            "variants": option_kinds,
        },
    )
    num_envs: int = field(default=4, metadata={"help": "devices stepping in parallel", "min": 1})
    worker: Literal["subprocess", "serial", "ray", "fleet"] = field(
        default="subprocess",
        metadata={
            "help": "where devices run: started by the run (subprocess, serial, ray) or the "
            "warm devices of a running fleet (devicerl fleet up; docs/fleet.md)"
        },
    )
    fleet: str = field(
        default="default",
        metadata={"help": "with worker fleet: the name of the fleet the devices come from"},
    )
    # The pool's supervisor owns these defaults; the run config only exposes them.
    step_timeout_s: float = field(
        default=_SUPERVISOR.step_timeout,
        metadata={"help": "restart a device whose step takes longer (seconds)", "gt": 0},
    )
    reset_timeout_s: float = field(
        default=_SUPERVISOR.reset_timeout,
        metadata={"help": "restart a device whose reset takes longer (seconds)", "gt": 0},
    )

    def __post_init__(self) -> None:
        """Built in code: no options are the device's defaults, a mapping is read into its
        dataclass (the loader hands over the dataclass, read by ``type_from``)."""
        try:
            options_type(self.name)
        except ConfigError as e:
            raise ConfigError(f"env.name: {e}") from None
        from devicerl.pool.workers.fleet import FleetFolder

        try:
            FleetFolder(self.fleet)
        except ConfigError as e:
            raise ConfigError(f"env.fleet: {e}") from None
        self.options = read_options(self.name, self.options, key="env.options")

    def make_pool(self, tasks: TaskSampler, seed: int = 0) -> EnvPool:
        """``num_envs`` supervised devices playing ``tasks`` (in this process's pool)."""
        from devicerl.pool.pool import EnvPool

        specs = [EnvSpec(self.name, self.options) for _ in range(self.num_envs)]
        return EnvPool(
            specs,
            tasks=tasks,
            worker=self.worker,
            worker_options={"name": self.fleet} if self.worker == "fleet" else None,
            supervision=SupervisorConfig(
                step_timeout=self.step_timeout_s, reset_timeout=self.reset_timeout_s
            ),
            seed=seed,
        )


@dataclass
class TasksConfig:
    """Which tasks to train and evaluate on (suites, splits, globs or instruction-list paths)."""

    train: str = field(default="miniwob-dev", metadata={"help": "training task spec"})
    eval: str = field(default="", metadata={"help": "evaluation task spec (empty: train)"})
    max_steps: int | None = field(
        default=None,
        metadata={"help": "step budget of every task (null: each task's own)", "min": 1},
    )


@dataclass
class EvalConfig:
    """Evaluation: the first ``n_tasks`` tasks of the split, in order, each ``episodes_per_task``
    times with fixed seeds, greedy by default; success with a 95 % Wilson interval."""

    n_tasks: int = field(default=96, metadata={"help": "first N tasks of the eval split", "min": 1})
    episodes_per_task: int = field(default=1, metadata={"help": "seeds per task", "min": 1})
    greedy: bool = field(default=True, metadata={"help": "arg-max actions (else sample)"})
    split: Literal["validation", "test"] = field(
        default="validation",
        metadata={
            "help": "instance seed range (disjoint from training's): validation while "
            "developing, test for reported results only"
        },
    )
    at_end: bool = field(default=True, metadata={"help": "evaluate when training ends"})


@dataclass
class ExplorationConfig:
    """Success-adaptive exploration (`devicerl.runtime.acting.exploration`; an addition beyond the
    paper): each training episode's exploration level from its task's recent success."""

    max: float | None = field(
        default=None,
        metadata={"help": "level of a task with no recent success (null: off)", "gt": 0, "lt": 1},
    )
    window: int = field(default=20, metadata={"help": "recent episodes per task", "min": 1})
    rule: Literal["linear", "unsolved"] = field(
        default="linear",
        metadata={
            "help": "linear: max x (1 - recent success), unseen tasks at max; unsolved: max only "
            "for tasks whose recent success is at most threshold, else 0 (a pre-trained start)"
        },
    )
    threshold: float = field(
        default=0.0,
        metadata={
            "help": "rule unsolved: the recent success rate at or below which a task explores",
            "min": 0,
            "lt": 1,
        },
    )
    probe: int | None = field(
        default=None,
        metadata={
            "help": "rule unsolved: every probe-th episode of an explored task acts without "
            "exploration, and only such episodes decide whether the task is solved (null: "
            "every episode decides)",
            "min": 1,
        },
    )


@dataclass
class LearnerConfig:
    """Where the learner runs. One process by default; ``accelerate launch --num_processes N``
    or ``num_workers: N`` (a Ray learner group) make it data-parallel (docs/scaling.md); in a
    league, ``num_workers: N`` spreads the policies' learners over N Ray actors (docs/league.md)."""

    num_workers: int = field(
        default=1,
        metadata={
            "help": "Ray learner actors (1: in the trainer): one DDP group, or a league's "
            "learner shards",
            "min": 1,
        },
    )
    gpus_per_worker: float = field(
        default=0.0,
        metadata={
            "help": "GPUs per Ray learner actor or learner shard (0: CPU, gloo; 1: NCCL)",
            "min": 0,
        },
    )


@dataclass
class ClusterConfig:
    """Which Ray cluster a run uses."""

    address: str = field(
        default="",
        metadata={
            "help": "Ray cluster to join: auto (the running one), HOST:PORT, or empty "
            "(start a private Ray on this machine when rollouts.groups > 0)"
        },
    )


@dataclass
class RolloutsConfig:
    """Rollout groups: where devices and inference run when collection scales out over a Ray
    cluster (docs/scaling.md): ``groups: G`` Ray actors, each with its own devices and policy
    replica, ship finished episodes to the learner, which judges them."""

    groups: int = field(
        default=0,
        metadata={"help": "rollout groups on the cluster (0: collect in this process)", "min": 0},
    )
    resources: dict[str, float] = field(
        default_factory=dict,
        metadata={
            "help": "Ray resources each group reserves: CPU (default 1), GPU (a share puts its "
            "policy replica on that GPU) and custom ones, e.g. {CPU: 1, GPU: 0.5, "
            "devicerl_group: 1}"
        },
    )

    def check_placement(self, env_worker: str) -> None:
        """Resource amounts are >= 0; devices of a group live on its node: they cannot be Ray
        actors elsewhere, nor a fleet's devices on this machine."""
        for name, amount in self.resources.items():
            if not amount >= 0:
                raise ConfigError(f"rollouts.resources.{name}={amount}: must be >= 0")
        if self.groups and env_worker in ("ray", "fleet"):
            raise ConfigError(
                "rollouts.groups: a group runs its devices on its own node; "
                "use env.worker subprocess or serial"
            )

    def actor_options(self) -> dict[str, Any]:
        """``ray.remote`` options of a group actor."""
        custom = dict(self.resources)
        return {
            "num_cpus": float(custom.pop("CPU", 1.0)),
            "num_gpus": float(custom.pop("GPU", 0.0)),
            "resources": custom,
            "max_restarts": 0,  # the fleet re-creates lost groups itself (new episode ids)
            "max_concurrency": 4,  # pull, set_weights and throttle while collecting
        }


@dataclass
class TrainConfig:
    """A training (or evaluation) run."""

    mode: Literal["online", "offline", "off2on", "eval"] = field(
        default="online", metadata={"help": "offline, online, off-to-online, or evaluate only"}
    )
    algo: Literal["digirl", "filtered_bc", "grpo", "gigpo", "none"] = field(
        default="digirl", metadata={"help": "learning algorithm (none: collect only)"}
    )
    seed: int = field(default=0, metadata={"help": "global seed", "min": 0})
    env: EnvConfig = field(default_factory=EnvConfig)
    tasks: TasksConfig = field(default_factory=TasksConfig)
    agent: AgentSpec = field(default_factory=AgentSpec)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    actor: ActorConfig = field(default_factory=ActorConfig)
    critic: CriticConfig = field(default_factory=CriticConfig)
    digirl: DigiRLConfig = field(default_factory=DigiRLConfig)
    filtered_bc: FilteredBCConfig = field(default_factory=FilteredBCConfig)
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    gigpo: GiGPOConfig = field(default_factory=GiGPOConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    exploration: ExplorationConfig = field(default_factory=ExplorationConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    rollouts: RolloutsConfig = field(default_factory=RolloutsConfig)
    policies: dict[str, PolicySpec] = field(
        default_factory=dict,
        metadata={
            "help": "named policies of a league run, each with its agent, algo and "
            "hyperparameters (empty: one policy from agent, algo, digirl; see docs/league.md)"
        },
    )
    league: LeagueConfig = field(default_factory=LeagueConfig)
    trajectories_per_iter: int = field(
        default=16, metadata={"help": "K: new trajectories per iteration", "min": 1}
    )
    replay_capacity: int = field(
        default=2000,
        metadata={"help": "trajectories kept in the replay buffer", "min": 1, "max": 10_000_000},
    )
    env_steps: int = field(
        default=20_000, metadata={"help": "online budget of env steps", "min": 1}
    )
    max_iterations: int | None = field(
        default=None,
        metadata={"help": "stop after this many iterations (null: no limit)", "min": 1},
    )
    offline_data: str | None = field(
        default=None,
        metadata={
            "help": "stored trajectories: a run dir, a store, or DigiRL .pt (comma-separated)"
        },
    )
    offline_iterations: int = field(
        default=100, metadata={"help": "iterations of the offline phase", "min": 0}
    )
    overlap: bool = field(
        default=True, metadata={"help": "keep collecting while the learner updates"}
    )
    checkpoint_every: int = field(
        default=5, metadata={"help": "iterations between checkpoints", "min": 1}
    )

    def validate(self) -> None:
        if self.mode in ("offline", "off2on") and not self.offline_data:
            raise ConfigError(f"mode {self.mode} needs offline_data (a run dir, store or .pt)")
        if self.mode != "eval" and self.algo == "none" and self.mode != "online":
            raise ConfigError("algo none only collects: use mode online or eval")
        self.rollouts.check_placement(self.env.worker)
        self.agent.validate()
        if self.policies:
            self._validate_league()

    def _validate_league(self) -> None:
        """A league run: cross-references, and what the league does not combine with yet."""
        validate_league(self.policies, self.league)
        if self.mode not in ("online", "eval"):
            raise ConfigError(f"policies: a league trains online only (mode {self.mode})")
        if self.rollouts.groups > 0:
            raise ConfigError("policies: a league collects in the trainer (rollouts.groups=0)")

    @classmethod
    def upgrade_saved(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        """A run config saved by an older version (``RUN/config.yaml``, read to resume) in
        today's layout (`devicerl.runtime.setup.saved`)."""
        from devicerl.runtime.setup.saved import upgrade_run_config

        return upgrade_run_config(data)

    @property
    def group_size(self) -> int | None:
        """Episodes per task-instance group (the group-relative learners), else None."""
        return self.grpo.group_size if self.algo in ("grpo", "gigpo") else None

    @property
    def eval_tasks(self) -> str:
        return self.tasks.eval or self.tasks.train
