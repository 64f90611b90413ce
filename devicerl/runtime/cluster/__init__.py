"""Scaling collection out over a Ray cluster: rollout groups and the fleet that drives them
(their options: `devicerl.runtime.train_config.RolloutsConfig` and ``ClusterConfig``)."""
