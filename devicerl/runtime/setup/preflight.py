"""Checks a run's config against the world before anything is written.

`load_config` already checked types and each dataclass's own rules (the device's name and its
options among them); `check_run_config` adds what needs the task registry and the file system:
the task specs (train and eval: a typo in ``tasks.eval`` fails at start, not after the training
budget), the agent's files and the offline data. It starts no device and writes nothing, so
a command calls it before it creates or locks a run folder.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from devicerl.errors import ConfigError, DeviceRLError
from devicerl.files import is_regular
from devicerl.runtime.setup.config import TrainConfig
from devicerl.tasks import resolve


def check_run_config(cfg: TrainConfig) -> None:
    """Raise `ConfigError` (one line naming the key) for anything the run would fail on."""
    _check_tasks(cfg)
    _check_agent(cfg)
    _check_offline(cfg)


def _check_tasks(cfg: TrainConfig) -> None:
    collects = cfg.mode in ("online", "off2on")
    evaluates = cfg.mode == "eval" or (cfg.eval.at_end and cfg.eval.n_tasks > 0)
    specs = []
    if collects or (evaluates and not cfg.tasks.eval):
        specs.append(("tasks.train", cfg.tasks.train))
    if cfg.tasks.eval:
        specs.append(("tasks.eval", cfg.tasks.eval))
    for key, spec in specs:
        try:
            resolve(spec)
        except DeviceRLError as e:
            raise ConfigError(f"{key}: {e}") from None


def _check_agent(cfg: TrainConfig) -> None:
    spec = cfg.agent
    for key in ("path", "vision_dir"):
        value = getattr(spec, key)
        if value and spec.kind in ("small", "autoui", "vlm") and not Path(value).exists():
            hint = " (docs/pretraining.md makes a pre-trained small agent)" if key == "path" else ""
            raise ConfigError(f"agent.{key}: {value} does not exist{hint}")


def _check_offline(cfg: TrainConfig) -> None:
    """Each part of ``offline_data`` is usable: a store (or run folder) holding episodes, or a
    torch file (a zip archive with a pickle, as ``torch.save`` writes), so a run is not created
    for data it cannot read."""
    if cfg.mode not in ("offline", "off2on"):
        return
    from devicerl.data.store import TrajectoryStore
    from devicerl.runtime.runs.folder import find_store

    for part in (p.strip() for p in (cfg.offline_data or "").split(",")):
        if not part:
            continue
        path = Path(part)
        if not path.exists():
            raise ConfigError(f"offline_data: {part} does not exist")
        if part.endswith(".pt"):
            _check_torch_file(path)
            continue
        try:
            episodes = TrajectoryStore(find_store(path)).index().num_rows
        except DeviceRLError as e:
            raise ConfigError(f"offline_data: {e}") from None
        if not episodes:
            raise ConfigError(f"offline_data: {part} holds no trajectories")


def _check_torch_file(path: Path) -> None:
    if not is_regular(path):
        raise ConfigError(f"offline_data: {path} is not a regular file")
    try:
        with zipfile.ZipFile(path) as z:
            pickled = any(n.endswith("data.pkl") for n in z.namelist())
    except (zipfile.BadZipFile, OSError):
        pickled = False
    if not pickled:
        raise ConfigError(
            f"offline_data: {path} is not a torch file (DigiRL trajectories are saved with "
            "torch.save)"
        )
