"""Scaling collection out over a Ray cluster: rollout groups and the fleet that drives them
(their options: `devicerl.runtime.setup.config.RolloutsConfig` and ``ClusterConfig``)."""
