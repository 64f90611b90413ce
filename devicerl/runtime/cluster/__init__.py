"""Scaling collection out over a Ray cluster: rollout groups and the fleet that drives them."""

from devicerl.runtime.cluster.config import ClusterConfig, RolloutsConfig

__all__ = ["ClusterConfig", "RolloutsConfig"]
