"""Task suites, splits and samplers.

Importing this package installs the task-name resolver devices use (``reset("miniwob/x")``)
and registers the devices named after suites (``make("miniwob/click-test")``,
``make("synthetic/tap")``): both know task names, which live here, above the devices.
"""

from devicerl.envs.base import set_task_resolver
from devicerl.envs.registry import register as register_device
from devicerl.tasks.base import SEED_RANGES, Task, TaskInstance, TaskSampler
from devicerl.tasks.browsergym import AGENTLAB_TEST, AGENTLAB_TRAIN
from devicerl.tasks.browsergym import task_name as browsergym_name
from devicerl.tasks.miniwob_table3 import TABLE3_TASKS, TRAIN, UNSEEN_TASKS, package_name
from devicerl.tasks.registry import (
    get,
    register_split,
    register_suite,
    resolve,
    splits,
    suite_needs,
    suite_tasks,
    suites,
)

set_task_resolver(get)
register_device(
    "synthetic/*",
    "devicerl.tasks.synthetic:make_synthetic_env",
    options="devicerl.envs.synthetic:SyntheticOptions",
    overwrite=True,
)
for _name in ("miniwob", "miniwob/*", "webskills/*", "webskills-reach/*"):
    register_device(
        _name,
        "devicerl.tasks.miniwob:make_miniwob_env",
        options="devicerl.tasks.miniwob:MiniWoBOptions",
        overwrite=True,
    )
for _name in ("browsergym", "browsergym/*"):
    register_device(
        _name,
        "devicerl.tasks.browsergym:make_browsergym_env",
        options="devicerl.envs.browsergym.options:BrowserGymOptions",
        overwrite=True,
    )
register_device(
    "androidworld/*",
    "devicerl.envs.androidworld.env:AndroidWorldEnv",
    options="devicerl.envs.androidworld.options:AndroidWorldOptions",
    overwrite=True,
)
register_suite("synthetic", "devicerl.tasks.synthetic:synthetic_tasks")
register_suite("miniwob", "devicerl.tasks.miniwob:miniwob_tasks")
register_suite("webskills", "devicerl.tasks.webskills:webskills_tasks")
register_suite("webskills-reach", "devicerl.tasks.webskills:webskills_reach_tasks")
register_suite(
    "browsergym",
    "devicerl.tasks.browsergym:browsergym_tasks",
    needs="devicerl.tasks.browsergym:browsergym_needs",
)
register_suite(
    "androidworld",
    "devicerl.tasks.androidworld:androidworld_tasks",
    needs="devicerl.tasks.androidworld:androidworld_needs",
)
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
#: The dev tasks plus eight with more steps and longer horizons (checkboxes, menus, forms,
#: search, trees): where DigiRL's critics have something to decide (the ablations' split).
register_split(
    "miniwob-dev16",
    [
        *splits()["miniwob-dev"],
        "miniwob/click-checkboxes",
        "miniwob/click-collapsible",
        "miniwob/click-tab-2",
        "miniwob/enter-text-dynamic",
        "miniwob/login-user",
        "miniwob/navigate-tree",
        "miniwob/search-engine",
        "miniwob/multi-orderings",
    ],
)

#: Synapse's Table 3 (104 tasks), and its split into tasks to train on and tasks never trained on
#: (nor used in any decision): `devicerl.tasks.miniwob_table3`.
register_split("miniwob-table3", [package_name(t) for t in TABLE3_TASKS])
register_split("miniwob-train", [package_name(t) for t in TRAIN])
register_split("miniwob-unseen", [package_name(t) for t in UNSEEN_TASKS])

#: AgentLab's MiniWoB++ through BrowserGym (`devicerl.tasks.browsergym`): its 125 tasks and its
#: ``browsergym_split`` column.
register_split("agentlab-miniwob", ["browsergym/miniwob.*"])
register_split("agentlab-miniwob-train", [browsergym_name(t) for t in AGENTLAB_TRAIN])
register_split("agentlab-miniwob-test", [browsergym_name(t) for t in AGENTLAB_TEST])

__all__ = [
    "SEED_RANGES",
    "Task",
    "TaskInstance",
    "TaskSampler",
    "get",
    "register_split",
    "register_suite",
    "resolve",
    "splits",
    "suite_needs",
    "suite_tasks",
    "suites",
]
