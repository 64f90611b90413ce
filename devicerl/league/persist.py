"""League state on disk (JSON + safetensors, no pickle) that survives kill -9.

    DIR/league.json            members (spec, parent, version, weights file, hash), mapping,
                               success windows, counters, history, PBT state, RNG states
    DIR/weights/NAME-N.safetensors

`save_league` writes new weights files under fresh names, then replaces ``league.json``
atomically, then deletes files no longer referenced: a kill at any point leaves the previous
or the new state, never a mix. A frozen policy's file is written once and reused while its
hash holds (one copy per version). `load_league` rebuilds each policy from its spec, loads its
weights and checks their hash.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

from devicerl.config import from_dict, to_dict
from devicerl.errors import DataError
from devicerl.league.config import LeagueConfig, MappingRule, PBTConfig, PolicySpec
from devicerl.league.pbt import PBT
from devicerl.league.state import Frozen, League, weights_hash
from devicerl.league.success import SuccessTable
from devicerl.secrets import scrub_obj

FORMAT = 1
STATE = "league.json"


def _fsync_write(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _rng_json(rng: random.Random) -> list[Any]:
    version, state, gauss = rng.getstate()
    return [version, list(state), gauss]


def _rng_load(rng: random.Random, data: list[Any]) -> None:
    rng.setstate((data[0], tuple(data[1]), data[2]))


def save_league(league: League, directory: str | Path, pbt: PBT | None = None) -> Path:
    """Write ``league`` (and its ``pbt``) to ``directory``; returns the state file."""
    from safetensors.torch import save

    root = Path(directory)
    (root / "weights").mkdir(parents=True, exist_ok=True)
    previous = _read_state(root / STATE) if (root / STATE).exists() else {"members": []}
    old = {m["name"]: m for m in previous["members"]}
    seq = int(previous.get("seq", 0)) + 1
    members = []
    for name, m in league.members.items():
        digest = weights_hash(m.policy)
        kept = old.get(name)
        if kept and kept["hash"] == digest and (root / kept["weights"]).exists():
            file = kept["weights"]
        else:
            file = f"weights/{name}-{seq}.safetensors"
            weights = {k: v.contiguous() for k, v in m.policy.get_weights().items()}
            _fsync_write(root / file, save(weights))
        members.append({
            "name": name, "spec": scrub_obj(to_dict(m.spec)), "parent": m.parent,
            "created_iteration": m.created_iteration, "snapshot": m.snapshot,
            "teachers": m.teachers, "version": m.policy.version, "weights": file, "hash": digest,
        })  # fmt: skip
    state = {
        "format": FORMAT,
        "seq": seq,
        "iteration": league.iteration,
        "config": to_dict(league.config),
        "mapping": [to_dict(r) for r in league.mapping.rules],
        "mapping_rng": _rng_json(league.mapping.rng),
        "counters": dict(league.counters),
        "since_snapshot": dict(league.since_snapshot),
        "history": league.history,
        "success": league.success.to_json(),
        "members": members,
        "pbt": {"config": to_dict(pbt.config), **pbt.to_json()} if pbt is not None else None,
    }
    tmp = root / f"{STATE}.tmp"
    _fsync_write(tmp, json.dumps(state, indent=1).encode())
    os.replace(tmp, root / STATE)
    dir_fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    used = {m["weights"] for m in members}
    for path in (root / "weights").glob("*.safetensors"):
        if f"weights/{path.name}" not in used:
            path.unlink(missing_ok=True)
    return root / STATE


def _read_state(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"{path}: no league state here") from None
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise DataError(f"{path}: not a league state of format {FORMAT}")
    return data


def load_league(directory: str | Path) -> tuple[League, PBT | None]:
    """The league (and its PBT driver, if it had one) saved in ``directory``."""
    from safetensors.torch import load_file

    root = Path(directory)
    state = _read_state(root / STATE)
    config = from_dict(LeagueConfig, state["config"], prefix="league")
    league = League(config)
    league.iteration = int(state["iteration"])
    league.mapping.rules = [from_dict(MappingRule, r) for r in state["mapping"]]
    _rng_load(league.mapping.rng, state["mapping_rng"])
    for m in state["members"]:
        spec = from_dict(PolicySpec, m["spec"], prefix=f"policies.{m['name']}")
        policy = spec.agent.make()
        try:
            weights = load_file(root / m["weights"])
        except (OSError, ValueError) as e:
            raise DataError(f"{root / m['weights']}: cannot read weights ({e})") from None
        policy.set_weights(weights, version=int(m["version"]))
        if weights_hash(policy) != m["hash"]:
            raise DataError(f"{root / m['weights']}: weights hash differs from {STATE}")
        if not spec.trainable:
            policy = Frozen(policy)
        member = league.add_member(
            m["name"], spec, policy, parent=m["parent"], snapshot=bool(m["snapshot"]),
            teachers=list(m["teachers"]),
        )  # fmt: skip
        member.created_iteration = int(m["created_iteration"])
    league.success = SuccessTable.from_json(state["success"])
    league.counters = {k: int(v) for k, v in state["counters"].items()}
    league.history = list(state["history"])
    league.since_snapshot = {k: int(v) for k, v in state["since_snapshot"].items()}
    pbt = None
    if state.get("pbt") is not None:
        pbt = PBT(league, from_dict(PBTConfig, state["pbt"]["config"], prefix="league.pbt"))
        pbt.load_json(state["pbt"])
    return league, pbt
