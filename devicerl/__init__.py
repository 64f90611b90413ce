"""devicerl: train and evaluate device-control agents with asynchronous, supervised RL.

Importing the package wires the layers together once: `devicerl.tasks` installs the task-name
resolver and the suite-named devices (``make("miniwob/click-test")``) into the device registry,
so devices run named tasks without importing the layer that names them.
"""

from devicerl import tasks as _tasks  # noqa: F401 - wiring, see above
from devicerl.actions import Action, ActionType, format_autoui, parse_autoui
from devicerl.records import (
    EndReason,
    Observation,
    Step,
    StepResult,
    Task,
    TaskInstance,
    Trajectory,
    UIElement,
)

__version__ = "0.1.0"

__all__ = [
    "Action",
    "ActionType",
    "EndReason",
    "Observation",
    "Step",
    "StepResult",
    "Task",
    "TaskInstance",
    "Trajectory",
    "UIElement",
    "__version__",
    "format_autoui",
    "parse_autoui",
]
