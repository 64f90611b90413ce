"""The configuration of `devicerl train` and `devicerl eval` (YAML <-> these dataclasses).

Every field's help text is what ``devicerl train --help`` prints. Ready-made configs for each
mode and algorithm live in the repository's ``configs/`` folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from devicerl.agents.factory import AgentSpec
from devicerl.algos.config import DigiRLConfig, FilteredBCConfig
from devicerl.envs.registry import EnvSpec
from devicerl.errors import ConfigError
from devicerl.judges.config import JudgeConfig
from devicerl.league.config import LeagueConfig, PolicySpec, validate_league
from devicerl.pool.supervisor import SupervisorConfig
from devicerl.runtime.cluster.config import ClusterConfig, RolloutsConfig
from devicerl.runtime.distributed.config import LearnerConfig
from devicerl.runtime.metrics import LoggingConfig

if TYPE_CHECKING:
    from devicerl.pool.pool import EnvPool
    from devicerl.tasks import TaskSampler


_SUPERVISOR = SupervisorConfig()


@dataclass
class EnvConfig:
    """The devices."""

    name: str = field(
        default="browser", metadata={"help": "device backend: browser, synthetic, android, ..."}
    )
    kwargs: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "device options, e.g. {screenshot: false}"}
    )
    num_envs: int = field(default=4, metadata={"help": "devices stepping in parallel", "min": 1})
    worker: Literal["subprocess", "serial", "ray"] = field(
        default="subprocess", metadata={"help": "where devices run"}
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

    def make_pool(self, tasks: TaskSampler, seed: int = 0) -> EnvPool:
        """``num_envs`` supervised devices playing ``tasks`` (in this process's pool)."""
        from devicerl.pool.pool import EnvPool

        specs = [EnvSpec(self.name, dict(self.kwargs)) for _ in range(self.num_envs)]
        return EnvPool(
            specs,
            tasks=tasks,
            worker=self.worker,
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
    seed: int = field(
        default=10_000, metadata={"help": "seed of the evaluation instances", "min": 0}
    )
    split: Literal["validation", "test"] = field(
        default="validation",
        metadata={
            "help": "instance seed range (disjoint from training's): validation while "
            "developing, test for reported results only"
        },
    )
    at_end: bool = field(default=True, metadata={"help": "evaluate when training ends"})
    policy: str = field(
        default="",
        metadata={
            "help": "a league policy to evaluate, by name (empty: the agent, or in a league "
            "run its generalist)"
        },
    )
    league: str = field(
        default="",
        metadata={
            "help": "run folder (or saved league folder) whose league holds eval.policy "
            "(empty: this run's own league)"
        },
    )


@dataclass
class ExplorationConfig:
    """Success-adaptive exploration (`devicerl.runtime.exploration`; beyond the paper): each
    training episode's exploration level is ``max x (1 - its task's recent success rate)``
    (rule ``linear``), or ``max`` only while the task has no recent success (``unsolved``)."""

    max: float = field(
        default=0.0,
        metadata={"help": "level for a task with no recent success (0: off)", "min": 0, "lt": 1},
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
    probe: int = field(
        default=0,
        metadata={
            "help": "rule unsolved: every probe-th episode of an explored task acts without "
            "exploration, and only such episodes decide whether the task is solved (0: every "
            "episode decides; an explored multi-step task may then never leave exploration)",
            "min": 0,
        },
    )
    probe_greedy: bool = field(
        default=False,
        metadata={
            "help": "the probes act greedily (arg-max), not by sampling: a form the policy solves "
            "greedily but rarely by sampling then leaves exploration and yields successes"
        },
    )


@dataclass
class TrainConfig:
    """A training (or evaluation) run."""

    mode: Literal["online", "offline", "off2on", "eval"] = field(
        default="online", metadata={"help": "offline, online, off-to-online, or evaluate only"}
    )
    algo: Literal["digirl", "filtered_bc", "none"] = field(
        default="digirl", metadata={"help": "learning algorithm (none: collect only)"}
    )
    seed: int = field(default=0, metadata={"help": "global seed", "min": 0})
    env: EnvConfig = field(default_factory=EnvConfig)
    tasks: TasksConfig = field(default_factory=TasksConfig)
    agent: AgentSpec = field(default_factory=AgentSpec)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    digirl: DigiRLConfig = field(default_factory=DigiRLConfig)
    filtered_bc: FilteredBCConfig = field(default_factory=FilteredBCConfig)
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
    max_iterations: int = field(
        default=0, metadata={"help": "stop after this many iterations (0: no limit)", "min": 0}
    )
    offline_data: str = field(
        default="", metadata={"help": "stored trajectories: a run dir, a store, or DigiRL .pt"}
    )
    offline_iterations: int = field(
        default=100, metadata={"help": "iterations of the offline phase", "min": 0}
    )
    overlap: bool = field(
        default=True, metadata={"help": "keep collecting while the learner updates"}
    )
    max_policy_lag: int = field(
        default=0,
        metadata={
            "help": "never train on trajectories this many policy versions old or older: "
            "dropped on arrival, evicted from the replay (0: no limit, as the reference)",
            "min": 0,
        },
    )
    max_ahead: int = field(
        default=0,
        metadata={
            "help": "the collector pauses while this many trajectories wait for the learner "
            "(0: twice trajectories_per_iter)",
            "min": 0,
        },
    )
    checkpoint_every: int = field(
        default=5, metadata={"help": "iterations between checkpoints", "min": 1}
    )
    keep_checkpoints: int = field(
        default=3, metadata={"help": "newest checkpoints kept on disk", "min": 1}
    )
    torch_threads: int = field(
        default=1, metadata={"help": "torch CPU threads (0: torch's default)", "min": 0}
    )

    def validate(self) -> None:
        if self.mode in ("offline", "off2on") and not self.offline_data:
            raise ConfigError(f"mode {self.mode} needs offline_data (a run dir, store or .pt)")
        if self.mode != "eval" and self.algo == "none" and self.mode != "online":
            raise ConfigError("algo none only collects: use mode online or eval")
        self.rollouts.check_devices(self.env.worker)
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
        if self.learner.num_workers > 1:
            raise ConfigError(
                "policies: a league's learners use league.learner_shards, not learner.num_workers"
            )

    @property
    def eval_tasks(self) -> str:
        return self.tasks.eval or self.tasks.train
