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
register_suite("miniwob", "devicerl.tasks.miniwob:miniwob_tasks")
#: Eight easy MiniWoB++ tasks (click, focus, type): the learning benchmark's split.
register_split(
    "miniwob-dev",
    [
        "miniwob/click-test",
        "miniwob/click-test-2",
        "miniwob/click-button",
        "miniwob/click-link",
        "miniwob/click-dialog",
        "miniwob/click-tab",
        "miniwob/focus-text",
        "miniwob/enter-text",
    ],
)

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
