"""What ADP has no field for, kept in a trajectory's ``details`` (a map of strings).

Readable keys: ``task``, ``seed``, ``end_reason``, ``success`` (``true``/``false``) and
``judge_verdict`` (the applied judge label). The key ``devicerl`` holds a JSON object with the
rest: the episode id, device, phase, step budget, truncation cause, the judge's whole
`Judgement`, a human's ``ground_truth``, and per step (aligned with the trajectory's actions) the
log-prob, policy version, termination flags, per-step verdict and what makes the step's screen
and action exact (`StepExtra`). The readable keys are read back only beside ``devicerl``
(elsewhere a ``task`` or ``success`` key is another converter's). Keys that are not ours
(another converter's metadata) are kept on import in ``Trajectory.extras["adp"]["details"]`` and
written back on export, but for those named like our readable keys, which ours replace.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from devicerl.records import EndReason, Judgement, Trajectory

KEY = "devicerl"
#: The readable keys this module writes beside ``devicerl``.
READABLE = ("task", "seed", "end_reason", "success", "judge_verdict")
#: Version of the ``devicerl`` object's layout.
VERSION = 1
_INT64 = 2**63


@dataclass
class StepExtra:
    """One step's fields ADP lacks: the agent's log-prob and policy version, the device's flags,
    a per-step verdict, and the exact screen (``screen``: size, whole elements or element fixes)
    and action (``action``: `Action.to_dict`, only when its api_action does not read back
    exactly)."""

    log_prob: float | None = None
    policy_version: int = 0
    terminated: bool = False
    truncated: bool = False
    verdict: dict[str, Any] | None = None
    screen: dict[str, Any] = field(default_factory=dict)
    action: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The fields that differ from their defaults."""
        default = asdict(StepExtra())
        return {k: v for k, v in asdict(self).items() if v != default[k]}

    @classmethod
    def from_json(cls, d: Any, where: str) -> StepExtra:
        d = _object(d, where)
        unknown = set(d) - {f for f in cls.__dataclass_fields__}
        if unknown:
            raise ValueError(f"{where}: unknown field {sorted(unknown)[0]!r}")
        lp = d.get("log_prob")
        return cls(
            log_prob=None if lp is None else _finite(lp, f"{where}.log_prob"),
            policy_version=_int(d.get("policy_version", 0), f"{where}.policy_version"),
            terminated=_flag(d.get("terminated", False), f"{where}.terminated"),
            truncated=_flag(d.get("truncated", False), f"{where}.truncated"),
            verdict=_optional_object(d.get("verdict"), f"{where}.verdict"),
            screen=dict(_object(d.get("screen", {}), f"{where}.screen")),
            action=_optional_object(d.get("action"), f"{where}.action"),
        )


@dataclass
class Details:
    """A trajectory's details, read (`read`) or to write (`of` + `to_json`)."""

    task: str | None = None
    seed: int | None = None
    end_reason: EndReason | None = None
    success: bool | None = None
    episode_id: str | None = None
    device: str | None = None
    phase: str | None = None
    max_steps: int | None = None
    truncation_cause: str | None = None
    judgement: Judgement | None = None
    ground_truth: bool | None = None
    steps: list[StepExtra] | None = None
    final: dict[str, Any] | None = None
    #: keys that are not ours, kept as they came
    foreign: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, t: Trajectory, steps: list[StepExtra], final: dict[str, Any] | None) -> Details:
        adp = t.extras.get("adp")
        foreign = adp.get("details", {}) if isinstance(adp, dict) else {}
        return cls(
            task=t.task, seed=t.seed, end_reason=t.end_reason, success=t.success,
            episode_id=t.episode_id, device=t.device, phase=t.phase, max_steps=t.max_steps,
            truncation_cause=t.truncation_cause, judgement=t.judgement,
            ground_truth=t.ground_truth, steps=steps, final=final,
            foreign={k: v for k, v in foreign.items() if k != KEY and k not in READABLE},
        )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.foreign)
        out["task"] = self.task or ""
        if self.seed is not None:
            out["seed"] = str(self.seed)
        if self.end_reason is not None:
            out["end_reason"] = self.end_reason.value
        out["success"] = "true" if self.success else "false"
        if self.judgement is not None:
            out["judge_verdict"] = str(self.judgement.verdict.get("label", ""))
        ours: dict[str, Any] = {
            "version": VERSION,
            "episode_id": self.episode_id,
            "device": self.device,
            "phase": self.phase,
            "max_steps": self.max_steps,
            "truncation_cause": self.truncation_cause,
            "judgement": asdict(self.judgement) if self.judgement is not None else None,
            "ground_truth": self.ground_truth,
            "steps": [s.to_json() for s in self.steps or []],
            "final": self.final,
        }
        out[KEY] = json.dumps({k: v for k, v in ours.items() if v is not None},
                              ensure_ascii=False, allow_nan=False)  # fmt: skip
        return out

    @classmethod
    def read(cls, details: Any) -> Details:
        """The details of an ADP trajectory (any converter's); `ValueError` names a field that
        is present but malformed."""
        details = _object(details, "details")
        if KEY not in details:  # another converter's metadata: none of its keys are ours
            return cls(foreign=dict(details))
        out = cls(foreign={k: v for k, v in details.items() if k != KEY and k not in READABLE})
        if isinstance(details.get("task"), str) and details["task"]:
            out.task = details["task"]
        if "seed" in details:
            out.seed = _int(_parsed(details["seed"], "details.seed"), "details.seed")
        if "end_reason" in details:
            try:
                out.end_reason = EndReason(details["end_reason"])
            except ValueError:
                raise ValueError(f"details.end_reason {details['end_reason']!r} is not one of "
                                 f"{[r.value for r in EndReason]}") from None  # fmt: skip
        if "success" in details:
            out.success = _flag(_parsed(details["success"], "details.success"), "details.success")
        out._read_ours(details[KEY])
        return out

    def _read_ours(self, text: Any) -> None:
        where = f"details.{KEY}"
        d = _object(_parsed(text, where), where)
        version = _int(d.get("version", VERSION), f"{where}.version")
        if version > VERSION:
            raise ValueError(f"{where}.version {version} is newer than this devicerl's ({VERSION})")
        for k in ("episode_id", "device", "phase", "truncation_cause"):
            if d.get(k) is not None:
                if not isinstance(d[k], str):
                    raise ValueError(f"{where}.{k} is {type(d[k]).__name__}, not text")
                setattr(self, k, d[k])
        if d.get("max_steps") is not None:
            self.max_steps = _int(d["max_steps"], f"{where}.max_steps")
        if d.get("ground_truth") is not None:
            self.ground_truth = _flag(d["ground_truth"], f"{where}.ground_truth")
        if d.get("judgement") is not None:
            self.judgement = _judgement(d["judgement"], f"{where}.judgement")
        if "steps" in d:
            steps = d["steps"]
            if not isinstance(steps, list):
                raise ValueError(f"{where}.steps is {type(steps).__name__}, not a list")
            self.steps = [
                StepExtra.from_json(s, f"{where}.steps[{i}]") for i, s in enumerate(steps)
            ]
        self.final = _optional_object(d.get("final"), f"{where}.final")


def _judgement(d: Any, where: str) -> Judgement:
    d = _object(d, where)
    try:
        j = Judgement(**d)
    except TypeError as e:
        raise ValueError(f"{where}: {e}") from None
    if not isinstance(j.verdict, dict) or not isinstance(j.native_success, bool):
        raise ValueError(f"{where}: verdict must be an object and native_success a flag")
    j.cut_steps = _int(j.cut_steps, f"{where}.cut_steps")
    return j


def _parsed(v: Any, where: str) -> Any:
    """A details value: written as a string by us (JSON inside), or a plain JSON value."""
    if not isinstance(v, str):
        return v
    try:
        return json.loads(v)
    except (json.JSONDecodeError, RecursionError, ValueError) as e:
        raise ValueError(f"{where} is not valid JSON: {str(e)[:80]}") from None


def _object(v: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise ValueError(f"{where} is {type(v).__name__}, not an object")
    return v


def _optional_object(v: Any, where: str) -> dict[str, Any] | None:
    return None if v is None else dict(_object(v, where))


def _int(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not -_INT64 <= v < _INT64:
        raise ValueError(f"{where} {str(v)[:40]!r} is not a 64-bit integer")
    return v


def _finite(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{where} {str(v)[:40]!r} is not a finite number")
    return float(v)


def _flag(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"{where} {str(v)[:40]!r} is not true or false")
    return v
