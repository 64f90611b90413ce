"""Task suites, splits and samplers."""

from devicerl.tasks.base import Task, TaskInstance, TaskSampler
from devicerl.tasks.registry import (
    get,
    register_split,
    register_suite,
    resolve,
    splits,
    suite_tasks,
    suites,
)

register_suite("synthetic", "devicerl.envs.synthetic:synthetic_tasks")

__all__ = [
    "Task",
    "TaskInstance",
    "TaskSampler",
    "get",
    "register_split",
    "register_suite",
    "resolve",
    "splits",
    "suite_tasks",
    "suites",
]
