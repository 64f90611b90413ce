"""devicerl: train and evaluate device-control agents with asynchronous, supervised RL."""

from devicerl.actions import Action, ActionType, format_autoui, parse_autoui
from devicerl.records import EndReason, Observation, Step, StepResult, Trajectory, UIElement

__version__ = "0.1.0"

__all__ = [
    "Action",
    "ActionType",
    "EndReason",
    "Observation",
    "Step",
    "StepResult",
    "Trajectory",
    "UIElement",
    "__version__",
    "format_autoui",
    "parse_autoui",
]
