"""The hyperparameters a population searches, read from and written into a `PolicySpec`.

Each name maps onto one config field (``actor_lr`` -> ``actor.lr``), so a member's
hyperparameters live in its spec (saved with the league) and an exploit copies them by value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from devicerl.league.config import PBT_HPARAMS, PolicySpec


def _algo(spec: PolicySpec) -> Any:
    return spec.filtered_bc if spec.algo == "filtered_bc" else spec.digirl


def _set_actor_lr(spec: PolicySpec, v: float) -> None:
    spec.actor.lr = v


def _set_top_p(spec: PolicySpec, v: float) -> None:
    _algo(spec).top_p = v


def _set_epsilon(spec: PolicySpec, v: float) -> None:
    spec.agent.small = dataclasses.replace(spec.agent.small, epsilon=v)


#: name -> (read, write) of the config field it stands for.
HPARAMS: dict[str, tuple[Callable[[PolicySpec], float], Callable[[PolicySpec, float], None]]] = {
    "actor_lr": (lambda s: s.actor.lr, _set_actor_lr),
    "top_p": (lambda s: _algo(s).top_p, _set_top_p),
    "epsilon": (lambda s: s.agent.small.epsilon, _set_epsilon),
}

assert set(HPARAMS) == set(PBT_HPARAMS)

#: Values each field accepts (perturbed values are clipped into them).
LIMITS: dict[str, tuple[float, float]] = {
    "actor_lr": (1e-8, 1.0),
    "top_p": (1e-3, 1.0),
    "epsilon": (0.0, 0.5),
}


def get_hparams(spec: PolicySpec, names: list[str]) -> dict[str, float]:
    """The named hyperparameters' current values in ``spec``."""
    return {n: float(HPARAMS[n][0](spec)) for n in names}


def set_hparams(spec: PolicySpec, values: dict[str, float]) -> None:
    """Write ``values`` into ``spec`` (clipped into each field's accepted range)."""
    for name, v in values.items():
        low, high = LIMITS[name]
        HPARAMS[name][1](spec, min(max(float(v), low), high))


def apply_to_policy(policy: Any, spec: PolicySpec) -> None:
    """Make a live small agent act with the spec's exploration floor (``config.epsilon``)."""
    config = getattr(policy, "config", None)
    if config is not None and hasattr(config, "epsilon"):
        policy.config = dataclasses.replace(config, epsilon=spec.agent.small.epsilon)
