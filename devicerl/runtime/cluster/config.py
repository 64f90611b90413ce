"""The ``cluster`` and ``rollouts`` sections of a training config (see ``docs/scaling.md``).

With ``rollouts.groups: 0`` (the default) a run collects in its own process, as always. With
``rollouts.groups: G`` the same config collects on a Ray cluster: G rollout groups, each a Ray
actor with its own devices, policy replica and judge, ship finished episodes to the learner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from devicerl.errors import ConfigError


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
    """Rollout groups: where devices, inference and judging run when scaled out."""

    groups: int = field(
        default=0,
        metadata={"help": "rollout groups on the cluster (0: collect in this process)", "min": 0},
    )
    num_cpus: float = field(default=1.0, metadata={"help": "CPUs Ray reserves per group", "min": 0})
    num_gpus: float = field(
        default=0.0,
        metadata={"help": "GPUs per group (its policy replica then runs there)", "min": 0},
    )
    resources: dict[str, float] = field(
        default_factory=dict,
        metadata={"help": "custom Ray resources per group, e.g. {devicerl_group: 1}"},
    )
    poll_s: float = field(
        default=0.5,
        metadata={"help": "longest a group holds a pull with nothing to ship (s)", "gt": 0},
    )
    ledger: str = field(
        default="",
        metadata={
            "help": "audit file: every group appends the id of each episode the learner "
            "received from it"
        },
    )

    def check_devices(self, env_worker: str) -> None:
        """Devices of a group live on its node: they cannot be Ray actors elsewhere."""
        if self.groups and env_worker == "ray":
            raise ConfigError(
                "rollouts.groups: a group runs its devices on its own node; "
                "use env.worker subprocess or serial"
            )

    def actor_options(self) -> dict[str, Any]:
        """``ray.remote`` options of a group actor."""
        return {
            "num_cpus": self.num_cpus,
            "num_gpus": self.num_gpus,
            "resources": dict(self.resources),
            "max_restarts": 0,  # the fleet re-creates lost groups itself (new episode ids)
            "max_concurrency": 4,  # pull, set_weights and throttle while collecting
        }
