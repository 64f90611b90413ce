"""Can DigiRL's step critic see progress? Fresh step critics fit offline on a run's store.

A flat step critic (one value for every state of a trajectory) turns DigiRL's step filter into
a position rule (benchmarks/filter_audit.py). This asks whether the flatness comes from too
little training or from what the critic can represent: it fits fresh step critics, with the
run's own featurisation and sizes, for a range of update counts and learning rates on the run's
critic-training trajectories, and measures them on the run's held-out slice (the same hash
split the run used, never trained on), beside the run's own final step critic:

- ``brier`` / ``auc``: every held-out step's value against its episode's success;
- ``spread``: max - min of the values within a held-out success of two steps or more;
- ``rise``: V(last state) - V(first state) of such a success (> 0: the critic sees progress);
- ``success_steps_kept``: share of the held-out successes' steps the step filter keeps (the
  critic's own verdict, as if no success were rehearsed whole);
- ``failure_steps_kept``: share of the held-out failures' steps it keeps (steps whose value
  rise beats 1/H: what DigiRL can learn from a failure; 0 under a flat critic).

    python benchmarks/critic_fit.py RUN --updates 625 2500 10000 --lr 1e-4 1e-3 --out J
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from filter_audit import load_learner

from devicerl.algos.base import usable
from devicerl.algos.critic_fit import roc_auc, split_heldout
from devicerl.algos.digirl import DigiRL
from devicerl.algos.formulas import keep_steps
from devicerl.algos.selection import StepFilter, horizon
from devicerl.data.store import TrajectoryStore
from devicerl.records import Trajectory

COLUMNS = ("brier", "auc", "spread", "rise", "success_steps_kept", "failure_steps_kept")


def measure(learner: DigiRL, heldout: Sequence[Trajectory]) -> dict[str, float]:
    """The columns of `COLUMNS` for the learner's step critic on `heldout`."""
    values = learner.critics.step.values([s.observation for t in heldout for s in t.steps])
    labels = torch.tensor([float(t.success) for t in heldout for _ in t.steps])
    step_filter = StepFilter(learner.config.lam, learner.critics)
    spread, rise, kept = [], [], {True: [0, 0], False: [0, 0]}
    offset = 0
    for t in heldout:
        v = values[offset : offset + t.length]
        offset += t.length
        keep = keep_steps(step_filter.advantages(t, v), horizon(t))
        kept[t.success][0] += int(keep.sum())
        kept[t.success][1] += t.length
        if t.success and t.length > 1:
            spread.append(float(v.max() - v.min()))
            rise.append(float(v[-1] - v[0]))
    return {
        "brier": float(((values - labels) ** 2).mean()),
        "auc": roc_auc(values, [bool(y) for y in labels.tolist()]),
        "spread": sum(spread) / max(1, len(spread)),
        "rise": sum(rise) / max(1, len(rise)),
        "success_steps_kept": kept[True][0] / max(1, kept[True][1]),
        "failure_steps_kept": kept[False][0] / max(1, kept[False][1]),
    }


def fit(base: DigiRL, train: Sequence[Trajectory], updates: int, lr: float) -> DigiRL:
    """A copy of `base` whose step critic is refit from scratch: `updates` minibatches of the
    run's critic batch size at learning rate `lr`. The fresh weights come from the critic
    config's seed and the minibatches from a copy of `base`'s sampler, so every fit of a run
    starts from the same point."""
    learner = copy.deepcopy(base)
    critics = learner.critics
    fresh = type(critics.step)(critics.step.config)
    critics.step.load_state_dict(fresh.state_dict())
    critics.step_opt = torch.optim.AdamW(critics.step.parameters(), lr=lr)
    critics.fit(train, instruction_updates=0, step_updates=updates)
    return learner


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a DigiRL run folder (config.yaml inside)")
    ap.add_argument("--updates", type=int, nargs="+", default=[625, 2500, 10000])
    ap.add_argument("--lr", type=float, nargs="+", default=[1e-4, 1e-3])
    ap.add_argument("--out", type=Path, help="JSON file for the rows")
    args = ap.parse_args()
    base = load_learner(args.run)
    data = usable(list(TrajectoryStore(args.run / "trajectories")))
    train, heldout = split_heldout(data)
    if not heldout or not any(t.success for t in heldout):
        raise SystemExit(f"error: {args.run} has no held-out success to measure on")
    print(
        f"{args.run}: {len(train)} training trajectories, {len(heldout)} held out "
        f"({sum(t.success for t in heldout)} successes, "
        f"{sum(t.success and t.length > 1 for t in heldout)} of them of two steps or more)"
    )
    rows = {"run's final critic": measure(base, heldout)}
    for lr in args.lr:
        for updates in args.updates:
            start = time.monotonic()
            rows[f"fresh, {updates} updates, lr {lr:g}"] = measure(
                fit(base, train, updates, lr), heldout
            )
            print(f"  fit {updates} updates at lr {lr:g}: {time.monotonic() - start:.0f}s")
    print("| step critic | " + " | ".join(COLUMNS) + " |")
    print("|---|" + "---|" * len(COLUMNS))
    for name, row in rows.items():
        print(f"| {name} | " + " | ".join(f"{row[c]:.3f}" for c in COLUMNS) + " |")
    if args.out:
        args.out.write_text(json.dumps({"run": str(args.run), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
