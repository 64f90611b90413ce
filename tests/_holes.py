"""Helpers of the tests of the issue's findings (tests/test_holes_*.py): the real command line
in this process, folder snapshots, small real stores."""

from __future__ import annotations

import hashlib
import io
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from devicerl.agents.random import RandomPolicy
from devicerl.cli.main import main
from devicerl.envs import make
from devicerl.records import Trajectory
from devicerl.runtime.acting.rollout import rollout

#: A training config on a synthetic device that finishes in a few seconds.
SYN = [
    "env.name=synthetic",
    "env.worker=serial",
    "env.num_envs=1",
    "tasks.train=synthetic/tap",
    "logging.tensorboard=false",
    "eval.at_end=false",
]


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def errors(self) -> list[str]:
        return [line for line in self.err.splitlines() if "error:" in line]

    def one_line(self) -> str:
        """The one error line of a refused input (exit code 2, no traceback)."""
        assert self.code == 2, (self.code, self.err)
        assert "Traceback" not in self.err + self.out, self.err
        assert len(self.errors) == 1, self.err
        return self.errors[0]


def cli(capsys, *argv: str | Path) -> Result:
    """``devicerl ARGV`` through the real entry point, in this process."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:  # argparse
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return Result(code, out, err)


def snapshot(folder: Path) -> dict[str, str]:
    """Every entry under ``folder`` (links as their target, files by content hash)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        key = str(p.relative_to(folder))
        if p.is_symlink():
            out[key] = "-> " + os.readlink(p)
        elif p.is_file():
            out[key] = hashlib.sha256(p.read_bytes()).hexdigest()
        elif p.is_dir():
            out[key] = "dir"
        else:
            out[key] = "special"
    return out


def episodes(n: int, *, screenshots: bool = True, seed: int = 0) -> list[Trajectory]:
    """``n`` real synthetic-device episodes (tap task), with or without screenshots."""
    env = make("synthetic", screen=(96, 160), seed=seed, render=screenshots)
    out = [rollout(env, RandomPolicy(seed=seed + i), "synthetic/tap", seed=i) for i in range(n)]
    env.close()
    return out


def png_claiming(width: int, height: int) -> bytes:
    """A small PNG whose header claims ``width`` x ``height`` pixels (its data is a 1x1
    image's): what a hostile store can hold in a few bytes."""
    buf = io.BytesIO()
    Image.fromarray(np.zeros((1, 1, 3), np.uint8)).save(buf, format="PNG")
    data = bytearray(buf.getvalue())
    ihdr = data.index(b"IHDR")
    data[ihdr + 4 : ihdr + 12] = struct.pack(">II", width, height)
    crc = zlib.crc32(bytes(data[ihdr : ihdr + 17]))
    data[ihdr + 17 : ihdr + 21] = struct.pack(">I", crc)
    return bytes(data)
