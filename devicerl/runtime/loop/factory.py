"""`make_trainer`: the one way to build a training loop from a config, with the observers the
config names registered (as Sample Factory builds its runner and registers observers on it).

The CLI, the benchmarks and the tests build trainers here, so a config means the same run
wherever it is started: a config with ``policies:`` is a league run (`LeagueRun` registered),
any other a single-policy run.
"""

from __future__ import annotations

from devicerl.errors import ConfigError
from devicerl.runtime.distributed.process_group import ProcessGroupInfo
from devicerl.runtime.loop.observers import TrainerObserver
from devicerl.runtime.loop.trainer import Trainer
from devicerl.runtime.runs.folder import RunDir
from devicerl.runtime.setup.config import TrainConfig


def config_observers(cfg: TrainConfig) -> list[TrainerObserver]:
    """The observers ``cfg`` names: a league run's `LeagueRun` (none otherwise)."""
    if not cfg.policies:
        return []
    from devicerl.runtime.loop.league import LeagueRun

    return [LeagueRun(cfg)]


def make_trainer(
    cfg: TrainConfig,
    run_dir: RunDir,
    *,
    resume: bool = False,
    launch: ProcessGroupInfo | None = None,
) -> Trainer:
    """The trainer of ``cfg`` in ``run_dir`` with its config's observers registered; with
    ``resume``, restored from the run's newest checkpoint. ``launch``: this process's place in
    an ``accelerate launch`` (rank 0)."""
    if cfg.policies and launch is not None and launch.world_size > 1:
        raise ConfigError("policies: a league run does not run under accelerate launch")
    trainer = Trainer(cfg, run_dir, launch=launch)
    for observer in config_observers(cfg):
        trainer.register_observer(observer)
    if resume:
        trainer.restore()
    return trainer
