"""Success judges: the task's own check (native) or a vision-language model (VLM).

`make_judge(JudgeConfig)` builds the one ``kind`` names; `JudgeRunner` judges finished
trajectories asynchronously; `evaluate_judge` measures a judge against ground truth.
"""

from devicerl.judges.apply import apply_verdict, is_labelled, judge_trajectory
from devicerl.judges.base import Judge, Label, Verdict
from devicerl.judges.config import JudgeConfig, VLMJudgeConfig
from devicerl.judges.factory import make_judge, make_runner
from devicerl.judges.native import NativeJudge
from devicerl.judges.runner import Judged, JudgeRunner

__all__ = [
    "Judge",
    "JudgeConfig",
    "JudgeRunner",
    "Judged",
    "Label",
    "NativeJudge",
    "VLMJudgeConfig",
    "Verdict",
    "apply_verdict",
    "is_labelled",
    "judge_trajectory",
    "make_judge",
    "make_runner",
]
