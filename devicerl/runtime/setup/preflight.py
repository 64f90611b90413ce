"""Checks a run's config against the world before anything is written.

`load_config` already checked types and each dataclass's own rules (the device's name and its
options among them); `check_run_config` adds what needs the task registry and the file system:
the task specs (train and eval: a typo in ``tasks.eval`` fails at start, not after the training
budget), the fleet a run attaches to, the agent's files and the offline data. It starts no
device and writes nothing, so a command calls it before it creates or locks a run folder.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from devicerl.agents.factory import AgentSpec
from devicerl.clients.chat import ChatConfig, unset_key_message
from devicerl.envs.registry import EnvSpec
from devicerl.errors import ConfigError, DeviceRLError
from devicerl.files import is_regular
from devicerl.pool.workers.base import DeviceRecipe
from devicerl.pool.workers.fleet import check_fleet
from devicerl.runtime.setup.agent_options import check_agent_options
from devicerl.runtime.setup.config import TrainConfig
from devicerl.runtime.setup.sizes import check_sizes
from devicerl.tasks import resolve


def check_run_config(cfg: TrainConfig) -> None:
    """Raise `ConfigError` (one line naming the key) for anything the run would fail on."""
    episode_steps = _check_tasks(cfg)
    _check_devices(cfg)
    _check_agent(cfg)
    offline_steps = _check_offline(cfg)
    _check_keys(cfg)
    check_sizes(cfg, offline_steps, episode_steps)


def _check_tasks(cfg: TrainConfig) -> int:
    """The task specs resolve; returns the longest episode the training tasks allow."""
    collects = cfg.mode in ("online", "off2on")
    evaluates = cfg.mode == "eval" or (cfg.eval.at_end and cfg.eval.n_tasks > 0)
    specs = []
    if collects or (evaluates and not cfg.tasks.eval):
        specs.append(("tasks.train", cfg.tasks.train))
    if cfg.tasks.eval:
        specs.append(("tasks.eval", cfg.tasks.eval))
    longest = cfg.tasks.max_steps or 1
    for key, spec in specs:
        try:
            tasks = resolve(spec)
        except DeviceRLError as e:
            raise ConfigError(f"{key}: {e}") from None
        if key == "tasks.train" and cfg.tasks.max_steps is None:
            longest = max(t.max_steps for t in tasks)
    return longest


def _check_devices(cfg: TrainConfig) -> None:
    """A run attaching to a fleet finds it up, with its devices and enough of them."""
    uses_devices = cfg.mode != "offline" or (cfg.eval.at_end and cfg.eval.n_tasks > 0)
    if cfg.env.worker == "fleet" and uses_devices:
        recipe = DeviceRecipe.from_spec(EnvSpec(cfg.env.name, cfg.env.options))
        try:
            check_fleet(cfg.env.fleet, recipe, cfg.env.num_envs)
        except ConfigError as e:
            raise ConfigError(f"env.worker=fleet: {e}") from None


def _check_agent(cfg: TrainConfig) -> None:
    spec = cfg.agent
    for key in ("path", "vision_dir"):
        value = getattr(spec, key)
        if value and spec.kind in ("small", "autoui", "vlm") and not Path(value).exists():
            hint = " (docs/pretraining.md makes a pre-trained small agent)" if key == "path" else ""
            raise ConfigError(f"agent.{key}: {value} does not exist{hint}")
    for where, agent in _agents(cfg):
        check_agent_options(where, agent)


def _check_offline(cfg: TrainConfig) -> int:
    """Each part of ``offline_data`` is usable: a store (or run folder) holding episodes, or a
    torch file (a zip archive with a pickle, as ``torch.save`` writes), so a run is not created
    for data it cannot read. Returns the steps its stores hold."""
    if cfg.mode not in ("offline", "off2on"):
        return 0
    from devicerl.data.store import TrajectoryStore
    from devicerl.runtime.runs.folder import find_store

    steps = 0
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
            index = TrajectoryStore(find_store(path)).index()
        except DeviceRLError as e:
            raise ConfigError(f"offline_data: {e}") from None
        if not index.num_rows:
            raise ConfigError(f"offline_data: {part} holds no trajectories")
        steps += sum(n or 0 for n in index.column("num_steps").to_pylist())
    return steps


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


def _agents(cfg: TrainConfig) -> list[tuple[str, AgentSpec]]:
    """The run's agents by option name: its own and each league policy's."""
    return [("agent", cfg.agent)] + [
        (f"policies.{n}.agent", p.agent) for n, p in cfg.policies.items()
    ]


def run_inputs(cfg: TrainConfig) -> list[tuple[str, Path]]:
    """The files and folders a run reads (option name, path), those that exist: its agents'
    folders, offline data, task files and few-shot examples. A new run's folder must lie apart
    from them (`devicerl.files.check_apart`)."""
    found: list[tuple[str, str]] = []
    for where, agent in _agents(cfg):
        found += [(f"{where}.{k}", getattr(agent, k)) for k in ("path", "init_from", "vision_dir")]
    found += [("offline_data", p) for p in (cfg.offline_data or "").split(",")]
    found += [("tasks.train", p) for p in cfg.tasks.train.split(",")]
    found += [("tasks.eval", p) for p in cfg.tasks.eval.split(",")]
    found.append(("judge.vlm.few_shot", cfg.judge.vlm.few_shot))
    return [(k, Path(v.strip())) for k, v in found if v and v.strip() and Path(v.strip()).exists()]


def chats_in_use(cfg: TrainConfig) -> list[tuple[str, ChatConfig]]:
    """The chat endpoints the run will call (option name, config): a VLM judge's, the API
    agents', the VLM agents' servers."""
    used = [("judge.chat", cfg.judge.chat)] if cfg.judge.kind == "vlm" else []
    for where, agent in _agents(cfg):
        if agent.kind == "api":
            used.append((f"{where}.api.chat", agent.api.chat))
        elif agent.kind == "vlm" and agent.vlm is not None and agent.vlm.server is not None:
            used.append((f"{where}.vlm.server", agent.vlm.server.chat))
    return used


def _check_keys(cfg: TrainConfig) -> None:
    """Every key variable an endpoint in use names is set: no run starts to send requests
    that cannot carry their key."""
    for where, chat in chats_in_use(cfg):
        if chat.api_key_env and not os.environ.get(chat.api_key_env):
            raise ConfigError(f"{where}.api_key_env: {unset_key_message(chat.api_key_env)}")
