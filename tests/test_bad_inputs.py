"""A table of bad inputs across config, CLI, tasks, stores, checkpoints, importers and endpoints.

Each row runs the real command line (`devicerl.cli.main.main`, in this process so the table
stays fast) in a fresh folder holding the row's inputs. A rejected input must answer with exit
code 2 and one error line naming the culprit, raise nothing (no traceback), and leave every file
as it was with nothing new written; an accepted one must work (exit 0) and lose nothing.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from devicerl.cli.main import main

SYN = ["env.name=synthetic", "env.worker=serial", "env.num_envs=1", "tasks.train=synthetic/tap"]
SYN += ["logging.tensorboard=false", "eval.at_end=false"]
KEY_VAR, KEY = "BAD_INPUTS_KEY", "sk-bad-inputs-0123456789"

#: the checkout's benchmarks (the tests run from a scratch folder)
BENCHMARKS = str(Path(__file__).resolve().parents[1] / "benchmarks")


@dataclass
class Row:
    """``argv`` with ``{dir}`` (the row's folder) and ``{url}`` (a 401 endpoint) filled in;
    ``expect`` is ``"ok"`` or the text the one error line must hold. ``run_folder``: the input
    was valid and the run started (its folder ``out/`` may hold what it did before the error,
    to resume from); nothing else may change. ``resumes``: an accepted ``--resume`` of a run
    whose newest checkpoint is damaged: it must fall back to the older one, set the damaged
    one aside (every byte kept) and leave the stored episodes as they were."""

    id: str
    argv: list[str]
    expect: str
    run_folder: bool = False
    resumes: bool = False


#: Ways to damage the newest checkpoint: (file, how) -> new bytes.
DAMAGE = {
    "flipped-byte": (
        "agent.actor.safetensors",
        lambda b: b[:-9] + bytes([b[-9] ^ 0xFF]) + b[-8:],
    ),
    "state-not-json": ("state.json", lambda b: b"{not json" + b[9:]),
    "truncated-optimizer": ("agent.actor.optim.pt", lambda b: b[: len(b) // 2]),
}


def train(*words: str, expect: str, id: str) -> Row:
    return Row(id, ["train", "--out", "{dir}/out", *SYN, *words], expect)


ROWS = [
    # -- config values: bounds, types, choices, keys -------------------------------------------
    train("env_steps=-5", expect="env_steps=-5: must be >= 1", id="negative-budget"),
    train("env.num_envs=0", expect="env.num_envs=0: must be >= 1", id="no-devices"),
    train("checkpoint_every=0", expect="checkpoint_every=0: must be >= 1", id="ckpt-every-0"),
    train("replay_capacity=0", expect="replay_capacity=0", id="empty-replay"),
    train("trajectories_per_iter=0", expect="trajectories_per_iter=0", id="k-0"),
    train("tasks.max_steps=0", expect="tasks.max_steps=0", id="max-steps-0"),
    train("eval.n_tasks=0", expect="eval.n_tasks=0", id="eval-no-tasks"),
    train("eval.episodes_per_task=-1", expect="eval.episodes_per_task=-1", id="eval-neg-seeds"),
    train("actor.lr=0", expect="actor.lr=0: must be > 0", id="lr-0"),
    train("digirl.top_p=1.5", expect="digirl.top_p=1.5: must be in (0, 1]", id="top-p"),
    train("digirl.lam=-0.1", expect="digirl.lam=-0.1", id="lambda"),
    train("digirl.selection=[step_filter, curriculum]", expect="in the order", id="steps"),
    train("exploration.max=1", expect="exploration.max=1: must be in (0, 1)", id="explore-1"),
    train("env.step_timeout_s=0", expect="env.step_timeout_s=0: must be > 0", id="timeout-0"),
    train("judge.chat.timeout_s=-1", expect="judge.chat.timeout_s=-1", id="chat-timeout"),
    train("judge.chat.max_concurrency=0", expect="judge.chat.max_concurrency=0", id="chat-cc"),
    train("agent.small.d_model=30", expect="d_model=30: must be a multiple of 4", id="heads"),
    train("agent.small.allowed_types=[FLY]", expect="'FLY'", id="action-type"),
    train(
        "agent.small.allowed_types=[DUAL_POINT,WAIT]",
        expect="agent.small.allowed_types: 'WAIT': the small agent chooses among AitW's seven",
        id="action-type-small",
    ),
    train("seed=abc", expect="seed: expected an integer, got 'abc'", id="seed-type"),
    train("mode=sideways", expect="mode: 'sideways' is not one of", id="mode-choice"),
    train("algo=ppo", expect="algo: 'ppo' is not one of", id="algo-choice"),
    train("env.worker=thread", expect="env.worker: 'thread' is not one of", id="worker"),
    train("logging.wandb_mode=cloud", expect="logging.wandb_mode", id="wandb-mode"),
    train("agent.kind=gpt", expect="agent.kind", id="agent-kind"),
    train("env.options=5", expect="env.options: expected a mapping", id="kwargs-type"),
    train("digirl.lamda=0.3", expect="'digirl.lamda' (did you mean 'lam'?)", id="typo"),
    train("mode=offline", expect="offline_data", id="offline-no-data"),
    train("judge.kind=vlm", expect="judge.chat.model", id="vlm-no-model"),
    train("judge.chat.base_url=ftp://x", expect="must start with http://", id="url-scheme"),
    # -- config files and override syntax ------------------------------------------------------
    train("--config", "{dir}/missing.yaml", expect="neither a file nor a shipped", id="no-file"),
    train("--config", "{dir}/bad.yaml", expect="line 4, column 5", id="yaml-syntax"),
    train("--config", "{dir}/list.yaml", expect="must hold a mapping", id="yaml-list"),
    train("--set", "seed", expect="must look like key.path=value", id="set-no-equals"),
    # -- command line --------------------------------------------------------------------------
    Row("no-verb", ["fly"], "invalid choice: 'fly'"),
    Row("missing-arg", ["train", "--out"], "expected one argument"),
    Row("stray-word", ["view", "{dir}/run", "--bogus"], "unrecognized arguments: --bogus"),
    Row("resume-none", ["train", "--resume", "{dir}/nothing"], "cannot read config"),
    Row(
        "resume-config",
        ["train", "--resume", "{dir}/run", "--config", "{dir}/list.yaml"],
        "drop --config",
    ),
    Row("resume-print", ["train", "--resume", "{dir}/run", "--print-config", "seed=3"], "ok"),
    Row("print-config", ["eval", "--out", "{dir}/out", *SYN, "--print-config"], "ok"),
    Row("bench-unknown", ["bench", "--dir", BENCHMARKS, "nosuch"], "unknown benchmark 'nosuch'"),
    # -- tasks ---------------------------------------------------------------------------------
    Row("task-glob", ["tasks", "nosuch/*"], "unknown task or suite 'nosuch/*'"),
    Row("task-list", ["tasks", "{dir}/missing.txt"], "cannot read instruction list"),
    # -- stores --------------------------------------------------------------------------------
    Row("view-missing", ["view", "{dir}/nothing"], "does not exist"),
    Row("view-bounds", ["view", "{dir}/run", "image_quality=500"], "must be in [1, 95]"),
    Row("view-garbage-shard", ["view", "{dir}/garbage"], "ok"),
    Row("view-newer-shard", ["view", "{dir}/newer"], "ok"),
    Row("judge-eval-empty", ["judge-eval", "{dir}/empty"], "no stored episodes"),
    # -- checkpoints: the newest of two is damaged (same size or not); resume falls back ---------
    *(
        Row(
            f"ckpt-{name}",
            ["train", "--resume", f"{{dir}}/ckpt-{name}", "env_steps=45"],
            "ok",
            resumes=True,
        )
        for name in DAMAGE
    ),
    # -- importers -----------------------------------------------------------------------------
    Row(
        "import-missing", ["import-digirl", "{dir}/nothing.pt", "--out", "{dir}/imp"], "nothing.pt"
    ),
    Row(
        "import-not-torch",
        ["import-digirl", "{dir}/good.pt", "{dir}/garbage.pt", "--out", "{dir}/imp"],
        "garbage.pt",
    ),
    Row(
        "import-outside-root",
        ["import-digirl", "{dir}/evil-path.pt", "--out", "{dir}/imp", "image_root={dir}/images"],
        "outside image_root",
    ),
    Row(
        "import-pickle", ["import-digirl", "{dir}/evil-pickle.pt", "--out", "{dir}/imp"], "refused"
    ),
    # -- run folders, task specs, devices and agents: checked before anything is written -------
    Row("out-exists", ["train", "--out", "{dir}/run", *SYN], "already exists"),
    train("tasks.eval=synthetic/tpa", expect="tasks.eval", id="eval-task-typo"),
    train("tasks.train=nosuchsuite", expect="tasks.train", id="train-task-typo"),
    train("env.name=nosuchdevice", expect="env.name", id="device-unknown"),
    Row("agent-path", ["eval", "--out", "{dir}/out", *SYN, "agent.path={dir}/none"], "agent.path"),
    Row("judge-eval-garbage-shard", ["judge-eval", "{dir}/garbage"], "ok"),
    # -- endpoints (a real loopback server that refuses the key) -------------------------------
    Row(
        "judge-401",
        [
            "train",
            "--out",
            "{dir}/out",
            *SYN,
            "env_steps=4",
            "judge.kind=vlm",
            "judge.chat.model=m",
            "judge.chat.base_url={url}",
            f"judge.chat.api_key_env={KEY_VAR}",
            "judge.vlm.cache_path=",
        ],
        f"HTTP 401 (unauthorized): check the API key in ${KEY_VAR}",
        run_folder=True,
    ),
    Row(
        "agent-401",
        [
            "eval",
            "--out",
            "{dir}/out",
            *SYN,
            "eval.n_tasks=1",
            "agent.kind=api",
            "agent.api.chat.model=m",
            "agent.api.chat.base_url={url}",
            f"agent.api.chat.api_key_env={KEY_VAR}",
        ],
        f"check the API key in ${KEY_VAR}",
        run_folder=True,
    ),
    Row(
        "judge-eval-401",
        [
            "judge-eval",
            "{dir}/run",
            "kind=vlm",
            "chat.model=m",
            "chat.base_url={url}",
            f"chat.api_key_env={KEY_VAR}",
            "vlm.cache_path=",
        ],
        "HTTP 401",
    ),
]


class Refusing:
    """A chat endpoint on loopback that answers every request 401."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = json.dumps({"error": "invalid key"}).encode()
                self.send_response(401)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        host, port = self.httpd.server_address[:2]
        self.url = f"http://{host}:{port}/v1"


@pytest.fixture(scope="module")
def endpoint():
    srv = Refusing()
    yield srv.url
    srv.httpd.shutdown()
    srv.httpd.server_close()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """Every input a row may need, built once: configs, a small run, damaged stores."""
    from devicerl.agents.random import RandomPolicy
    from devicerl.config import load_config
    from devicerl.envs import make
    from devicerl.runtime.acting.rollout import rollout
    from devicerl.runtime.runs.folder import RunDir
    from devicerl.runtime.setup.config import TrainConfig
    from devicerl.tasks import resolve

    root = tmp_path_factory.mktemp("inputs")
    (root / "bad.yaml").write_text("env:\n  num_envs: 3\n  name: [a\nseed: 1\n")
    (root / "list.yaml").write_text("- a\n- b\n")
    run = RunDir(root / "run").create()
    run.save_config(load_config(TrainConfig, None, SYN))
    env, task = make("synthetic/tap"), resolve("synthetic/tap")[0]
    with run.writer() as w:
        for seed in range(3):
            w.append(rollout(env, RandomPolicy(seed=seed), task, seed=seed))
    env.close()
    shards = sorted(run.trajectories.glob("*.parquet"))
    garbage = root / "garbage"
    shutil.copytree(run.trajectories, garbage)
    (garbage / "zz-garbage.parquet").write_bytes(b"PAR1 this is not a parquet file PAR1")
    newer = root / "newer"
    shutil.copytree(run.trajectories, newer)
    table = pq.read_table(shards[0])
    meta = {**(table.schema.metadata or {}), b"devicerl.store_version": b"99"}
    pq.write_table(table.replace_schema_metadata(meta), newer / "zz-newer.parquet")
    (root / "empty").mkdir()
    _digirl_inputs(root)
    _checkpoint_inputs(root)
    return root


def _checkpoint_inputs(root: Path) -> None:
    """A short run that keeps its newest checkpoints; a copy per way of damaging the newest."""
    good = root / "ckpt-good"
    argv = ["train", "--out", str(good), *SYN, "env_steps=40", "trajectories_per_iter=4"]
    assert main([*argv, "checkpoint_every=1"]) == 0
    newest = sorted((good / "checkpoints").glob("iter-*"))[-1].name
    for name, (file, damage) in DAMAGE.items():
        run = root / f"ckpt-{name}"
        shutil.copytree(good, run)
        path = run / "checkpoints" / newest / file
        path.write_bytes(damage(path.read_bytes()))


class _Evil:
    def __reduce__(self) -> tuple:
        return (print, ("executed",))


def _digirl_inputs(root: Path) -> None:
    """DigiRL .pt files: a good one, one that is no torch file, one whose image path leaves
    its image root, one that would run code when unpickled."""
    import torch

    def steps(image_path: str) -> list[dict[str, Any]]:
        return [
            {
                "observation": "Previous Actions: Goal: open settings</s>",
                "next_observation": "Previous Actions: ... Goal: open settings</s>",
                "image_path": image_path,
                "task": "open settings",
                "reward": 0.0,
                "done": False,
                "action": 'Action Decision: "action_type": "PRESS_HOME"',
            }
        ] * 2

    (root / "images").mkdir()
    torch.save([steps("/nfs/x_1.png")], root / "good.pt")
    (root / "garbage.pt").write_bytes(b"this is not a torch file")
    torch.save([steps("../../../../etc/passwd")], root / "evil-path.pt")
    torch.save([[_Evil()]], root / "evil-pickle.pt")


def _unnamed_runs(folder: str, names: list[str], root: Path, argv: str) -> set[str]:
    """Checkpoint runs at the top of ``root`` that ``argv`` does not name."""
    if Path(folder) != root:
        return set()
    return {n for n in names if n.startswith("ckpt-") and f"{{dir}}/{n}" not in argv}


def snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_bad_input(row: Row, inputs, endpoint, tmp_path, monkeypatch, capsys, caplog) -> None:
    folder = tmp_path / "row"
    # The checkpoint runs are large (~70 MB each): a row gets only the ones it names, so the
    # table does not write gigabytes.
    named = " ".join(row.argv)
    shutil.copytree(inputs, folder, ignore=lambda d, names: _unnamed_runs(d, names, inputs, named))
    monkeypatch.chdir(folder)
    monkeypatch.setenv(KEY_VAR, KEY)
    before = snapshot(folder)
    argv = [a.replace("{dir}", str(folder)).replace("{url}", endpoint) for a in row.argv]
    try:
        code = main(argv)
    except SystemExit as e:  # argparse
        code = e.code
    out, err = capsys.readouterr()
    after = snapshot(folder)
    assert "Traceback" not in err + out and KEY not in err + out
    if row.resumes:
        assert code == 0, err
        warned = caplog.text
        assert "falling back to the previous good checkpoint" in warned, warned
        run = Path(argv[2]).name
        damaged = max(k.split("/")[2] for k in before if k.startswith(f"{run}/checkpoints/iter-"))
        kept = set(after.values())
        lost = {  # the damaged checkpoint is set aside, never deleted
            k
            for k, v in before.items()
            if k.startswith(f"{run}/checkpoints/{damaged}/") and v not in kept
        }
        assert not lost, f"lost: {lost}"
        shards = {k: v for k, v in before.items() if k.startswith(f"{run}/trajectories/")}
        assert all(after.get(k) == v for k, v in shards.items() if k.endswith(".parquet"))
        return
    if row.expect == "ok":
        assert code == 0, err
        lost = {k for k, v in before.items() if after.get(k) != v}
        assert not lost, f"changed or removed: {lost}"
        return
    errors = [line for line in err.splitlines() if "error:" in line]
    assert code == 2 and len(errors) == 1, err
    assert row.expect in errors[0], errors[0]
    if row.run_folder:
        after = {k: v for k, v in after.items() if not k.startswith("out/")}
    assert after == before, f"written: {sorted(set(after) - set(before))}"


def test_the_table_covers_enough_bad_inputs() -> None:
    assert len(ROWS) >= 40 and len({r.id for r in ROWS}) == len(ROWS)
