"""A thin metrics logger: ``metrics.jsonl`` + TensorBoard by default, W&B when configured.

Names are namespaced ``<namespace>/<name>`` (CleanRL style) so dashboards group them; the ones
devicerl components use are listed in `KNOWN_METRICS`. ``step`` is the number of environment
steps collected so far (the x axis every learning curve shares). ``metrics.jsonl`` is what
`devicerl view` plots; it survives without TensorBoard or W&B.

W&B is off unless ``LoggingConfig.wandb_project`` names a project; it is imported only then,
reads its API key from the ``WANDB_API_KEY`` environment variable (never from a config) and
gets the run config with secrets redacted.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devicerl.errors import ConfigError, DataError
from devicerl.files import read_text

logger = logging.getLogger(__name__)

#: Metric names used across devicerl, with their meaning (x axis: env steps).
KNOWN_METRICS: dict[str, str] = {
    "rollout/success_rate": "success rate of recent episodes (a run: its last 100 stored ones)",
    "rollout/episode_length": "mean steps per finished episode",
    "rollout/episodes": "episodes finished so far",
    "rollout/successes": "successful episodes so far",
    "rollout/truncated": "episodes cut short by infrastructure so far",
    "judge/unlabelled": "complete episodes the judge could not label so far",
    "pool/steps_per_s": "environment steps per second over the last interval",
    "pool/restarts": "device restarts so far",
    "pool/busy_fraction": "fraction of devices stepping (not waiting for the agent)",
    "train/actor_loss": "actor loss",
    "train/critic_loss": "step-level critic loss",
    "train/instruction_critic_loss": "instruction-level critic loss",
    "train/policy_lag": "policy versions between acting and learning, averaged over a batch",
    "train/lr": "learning rate",
    "train/step_filter_kept_frac": "DigiRL: share of the curriculum's steps the step filter keeps",
    "train/curriculum_kept_frac": "DigiRL: share of the sampled trajectories the curriculum keeps",
    "train/kept_steps_failed_frac": "DigiRL: share of imitated steps from failed episodes",
    "train/success_steps_dropped_frac": "DigiRL: share of the kept successes' steps filtered out",
    "train/step_value_spread": "DigiRL: step critic's max - min value within a kept trajectory",
    "train/critic_brier": "DigiRL: step critic's Brier score on held-out trajectories' steps",
    "train/critic_accuracy": "DigiRL: step critic's accuracy (V > 0.5 vs success), held out",
    "train/instr_critic_auc": "DigiRL: instruction critic's ROC AUC on held-out trajectories",
    "eval/success_rate": "success rate on the evaluation tasks",
    "time/elapsed_s": "wall-clock seconds since the run started",
}

_NAME = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)+$")


@dataclass
class LoggingConfig:
    """Where metrics go (embed in a command's config as ``logging``)."""

    tensorboard: bool = field(default=True, metadata={"help": "write TensorBoard events to tb/"})
    wandb_project: str | None = field(
        default=None,
        metadata={
            "help": "also log to this Weights & Biases project (null: no W&B; entity and mode: "
            "W&B's own WANDB_ENTITY, WANDB_MODE)"
        },
    )


def _scalar(name: str, value: Any) -> float:
    try:
        return float(value.item() if hasattr(value, "item") else value)
    except (TypeError, ValueError):
        raise ValueError(f"metric {name!r}: {value!r} is not a number") from None


class MetricsLogger:
    """Logs scalar metrics of one run. Thread-safe; use as a context manager or `close`."""

    def __init__(
        self,
        run_dir: str | Path,
        config: LoggingConfig | None = None,
        *,
        run_config: Any = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.config = config or LoggingConfig()
        self._lock = threading.Lock()
        self._jsonl = open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self._tb = self._open_tensorboard() if self.config.tensorboard else None
        self._wandb = self._open_wandb(run_config) if self.config.wandb_project else None

    def _open_tensorboard(self) -> Any:
        from torch.utils.tensorboard import SummaryWriter

        return SummaryWriter(log_dir=str(self.run_dir / "tb"))

    def _open_wandb(self, run_config: Any) -> Any:
        try:
            import wandb
        except ImportError:
            raise ConfigError(
                "logging.wandb_project is set but the wandb package is missing: "
                "pip install 'devicerl[wandb]' (or set logging.wandb_project=null)"
            ) from None
        from devicerl.config import redact

        c = self.config
        return wandb.init(
            project=c.wandb_project,
            name=self.run_dir.name,
            dir=str(self.run_dir),
            config=redact(run_config) if run_config is not None else None,
        )

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        """Log scalars at ``step`` (env steps). Names must look like ``namespace/name``."""
        values: dict[str, float] = {}
        for name, value in metrics.items():
            if not _NAME.match(name):
                raise ValueError(f"metric name {name!r} must be namespaced, e.g. 'train/{name}'")
            values[name] = _scalar(name, value)
        record = {"step": int(step), "time": time.time()}
        record.update({k: (v if math.isfinite(v) else None) for k, v in values.items()})
        with self._lock:
            self._jsonl.write(json.dumps(record) + "\n")
            self._jsonl.flush()
            if self._tb is not None:
                for name, v in values.items():
                    self._tb.add_scalar(name, v, int(step))
            if self._wandb is not None:
                self._wandb.log(values, step=int(step))

    def flush(self) -> None:
        with self._lock:
            self._jsonl.flush()
            if self._tb is not None:
                self._tb.flush()

    def close(self) -> None:
        with self._lock:
            if not self._jsonl.closed:
                self._jsonl.close()
            if self._tb is not None:
                self._tb.close()
                self._tb = None
            if self._wandb is not None:
                self._wandb.finish()
                self._wandb = None

    def __enter__(self) -> MetricsLogger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: The largest ``metrics.jsonl`` read back (a long run writes a few MB).
MAX_METRICS_BYTES = 1 << 30


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Records of a ``metrics.jsonl``. A torn last line (a crash mid-write) is ignored; a bad
    line elsewhere raises `DataError` naming the file and line."""
    p = Path(path)
    lines = read_text(p, MAX_METRICS_BYTES, within=p.parent, what="metrics file").splitlines()
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            if not isinstance(rec, dict) or "step" not in rec:
                raise ValueError("not a metrics record")
            step = rec["step"]
            if isinstance(step, bool) or not isinstance(step, (int, float)):
                raise ValueError(f"step {step!r:.40} is not a number")
            if not (math.isfinite(step) and 0 <= step <= 2**63 - 1):
                raise ValueError(f"step {step} is not a finite count")
            rec = {  # a value that is no finite number is no point of a curve (the writer's None)
                k: None if isinstance(v, float) and not math.isfinite(v) else v
                for k, v in rec.items()
            }
        except ValueError as e:
            if i == len(lines) - 1:
                logger.warning("%s:%d: ignoring a torn last line", p, i + 1)
                break
            raise DataError(f"{p}:{i + 1}: malformed metrics line: {e}") from None
        out.append(rec)
    return out
