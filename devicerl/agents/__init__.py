"""Agents: the `Policy` interface and its implementations."""

from devicerl.agents.base import ActionSample, FunctionPolicy, Policy, as_policy
from devicerl.agents.random import RandomPolicy

__all__ = ["ActionSample", "FunctionPolicy", "Policy", "RandomPolicy", "as_policy"]
