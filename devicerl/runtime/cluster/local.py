"""A Ray cluster of several nodes on this machine, to try rollout groups without hosts.

Each worker node is a real raylet with its own CPUs and a ``devicerl_group`` resource (how many
rollout groups it hosts); a run asks for it with ``rollouts.resources={devicerl_group: 1}``, so
groups spread one per node exactly as on separate machines. Ray's own test helper
(`ray.cluster_utils.Cluster`) starts and stops the processes.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

from devicerl.errors import ConfigError

log = logging.getLogger(__name__)
GROUP_RESOURCE = "devicerl_group"


@dataclass
class LocalCluster:
    """A head node and ``nodes`` worker nodes on this machine (`start` / `shutdown`)."""

    nodes: int = 2
    cpus_per_node: float = 1.0
    groups_per_node: int = 1
    head_cpus: float = 1.0
    system_config: dict[str, Any] = field(default_factory=dict)
    cluster: Any = None

    def start(self) -> LocalCluster:
        if self.nodes < 0 or self.groups_per_node < 1:
            raise ConfigError(
                f"a local cluster needs nodes >= 0 and groups_per_node >= 1, "
                f"got {self.nodes} and {self.groups_per_node}"
            )
        try:
            from ray.cluster_utils import Cluster
        except ImportError:
            raise ConfigError("devicerl cluster needs Ray: pip install 'devicerl[ray]'") from None
        # a private loopback cluster: Ray's token auth would only get in the way
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        head = {"num_cpus": self.head_cpus, "include_dashboard": False}
        if self.system_config:
            head["_system_config"] = self.system_config
        for attempt in (1, 2, 3):  # on a saturated machine the head may miss its start-up wait
            try:
                self.cluster = Cluster(initialize_head=True, head_node_args=head)
                break
            except Exception as e:
                if attempt == 3 or "timed out during startup" not in str(e):
                    raise
                log.warning("Ray head did not start in time (%s); trying again", e)
        for i in range(self.nodes):
            self.add_node(f"node_{i}")
        self.cluster.wait_for_nodes()
        return self

    def add_node(self, name: str) -> Any:
        """One more worker node (it offers ``groups_per_node`` group slots)."""
        resources = {GROUP_RESOURCE: self.groups_per_node, name: 1}
        return self.cluster.add_node(num_cpus=self.cpus_per_node, resources=resources)

    @property
    def address(self) -> str:
        return self.cluster.address

    def shutdown(self) -> None:
        if self.cluster is not None:
            self.cluster.shutdown()
            self.cluster = None
