"""``devicerl interpolate START TRAINED --alpha A --out DIR``: an agent whose weights mix a
trained agent's with its start's (`devicerl.agents.interpolation`)."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "interpolate",
        help="save an agent whose weights are (1 - alpha) start + alpha trained",
        description="Mix a trained agent's weights with those of the agent it started from, "
        "tensor by tensor, into a new agent folder (every *.safetensors file; the other files "
        "are the trained agent's). Evaluate a few alphas on validation instances with "
        "`devicerl eval` and keep the best. See docs/agents.md.",
    )
    p.add_argument("start", metavar="START", help="the saved agent training started from")
    p.add_argument("trained", metavar="TRAINED", help="the saved agent training ended with")
    p.add_argument(
        "--alpha", type=float, required=True, help="the share of the trained weights, 0 to 1"
    )
    p.add_argument("--out", required=True, help="the new agent folder (must not exist)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from devicerl.agents.interpolation import interpolate_agents
    from devicerl.files import check_apart

    check_apart(args.out, [("START", args.start), ("TRAINED", args.trained)])
    out = interpolate_agents(Path(args.start), Path(args.trained), args.alpha, Path(args.out))
    print(f"saved {out} (alpha {args.alpha:g})")
    return 0
