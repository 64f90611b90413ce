"""Rollout groups on a real multi-node Ray cluster on this machine (`ray.cluster_utils.Cluster`).

Worker nodes carry a ``devicerl_group`` resource (one rollout group each). A training run
(`Trainer`, synthetic devices) spreads its groups over the nodes, keeps going when a node is
removed mid-run (the episodes running there end truncated ``node_lost``; every episode a group
shipped is in the store exactly once), and places the lost group again when a node joins.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import ray

from devicerl.config import load_config
from devicerl.runtime.runs.folder import RunDir
from devicerl.runtime.setup.config import TrainConfig

pytestmark = [pytest.mark.slow, pytest.mark.ray]


def _config(tmp_path: Path, groups: int, env_steps: int, *extra: str) -> TrainConfig:
    return load_config(
        TrainConfig,
        None,
        [
            "mode=online",
            "algo=none",
            "agent.kind=random",
            "env.name=synthetic/steps",
            "env.worker=serial",
            "env.num_envs=4",
            "env.options={render: false, step_latency: 0.03, reset_latency: 0.05}",
            "tasks.train=synthetic/steps",
            "trajectories_per_iter=8",
            f"env_steps={env_steps}",
            "eval.at_end=false",
            f"rollouts.groups={groups}",
            "rollouts.resources={CPU: 0.25, devicerl_group: 1}",
            *extra,
        ],
    )


def _ledger(path: Path) -> list[tuple[str, str, int, str]]:
    """(episode id, end reason, group, node id) of every episode a group shipped that reached
    the learner (a group writes a reply's rows once the fleet acknowledged it)."""
    if not path.exists():
        return []
    rows = [line.split("\t") for line in path.read_text().splitlines() if line]
    return [(r[0], r[1], int(r[2]), r[3]) for r in rows]


def _stored(run: Path) -> tuple[Counter[str], dict[str, tuple[str, str | None, str]]]:
    """How often each episode id is stored, and its (end reason, truncation cause, node)."""
    import json

    counts: Counter[str] = Counter()
    info: dict[str, tuple[str, str | None, str]] = {}
    for shard in sorted((run / "trajectories").glob("*.parquet")):
        cols = ["episode_id", "is_final", "end_reason", "truncation_cause", "episode_extras"]
        for row in pq.ParquetFile(shard).read(columns=cols).to_pylist():
            if row["is_final"]:
                counts[row["episode_id"]] += 1
                node = (json.loads(row["episode_extras"] or "{}") or {}).get("node", "")
                info[row["episode_id"]] = (row["end_reason"], row["truncation_cause"], node)
    return counts, info


def _wait(predicate, what: str, run: threading.Thread, timeout: float = 60.0) -> None:
    t0 = time.monotonic()
    while not predicate():
        assert run.is_alive(), f"the run ended while waiting for {what}"
        assert time.monotonic() < t0 + timeout, f"timed out waiting for {what}"
        time.sleep(0.1)
    print(f"{what}: {time.monotonic() - t0:.1f}s")


@pytest.fixture
def cluster(monkeypatch):
    """A Ray head node; the test adds worker nodes with a rollout-group slot each. Ray's
    default failure detection (a lost node is declared dead after ~15 s) is kept: faster
    health checks made the head itself miss its start-up on a saturated machine."""
    from devicerl.runtime.cluster.local import LocalCluster

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert not ray.is_initialized()
    local = LocalCluster(nodes=0)
    try:
        yield local.start()
    finally:
        ray.shutdown()
        local.shutdown()


def _add(local, name: str):
    node = local.add_node(name)
    local.cluster.wait_for_nodes()
    return node


def test_groups_spread_over_nodes_and_survive_node_loss(cluster, tmp_path: Path) -> None:
    from devicerl.runtime.loop.factory import make_trainer

    a = _add(cluster, "node_a")
    ledger = tmp_path / "run" / "rollouts-ledger.tsv"
    # a budget the run cannot reach while the test runs: however long Ray takes to declare
    # node b dead on a loaded machine, the run is still going; the test stops it at the end
    cfg = _config(tmp_path, 2, 1_000_000, f"cluster.address={cluster.address}")
    trainer = make_trainer(cfg, RunDir(tmp_path / "run"))
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(trainer.run()), daemon=True)
    thread.start()

    def nodes_shipping() -> set[str]:
        return {node for _, _, _, node in _ledger(ledger)}

    # one node with room: one group runs, the other waits for a slot
    _wait(lambda: len(_ledger(ledger)) >= 5, "episodes from the first node", thread)
    assert nodes_shipping() == {a.node_id}
    b = _add(cluster, "node_b")  # a node joins: the waiting group starts there
    _wait(lambda: b.node_id in nodes_shipping(), "the second node's group", thread)
    _wait(lambda: sum(n == b.node_id for *_, n in _ledger(ledger)) >= 5, "episodes from b", thread)
    cluster.cluster.remove_node(b, allow_graceful=False)  # mid-run: its group and devices die
    c = _add(cluster, "node_c")  # the lost group is placed again where there is room
    _wait(lambda: c.node_id in nodes_shipping(), "the re-created group on the third node", thread)
    _wait(lambda: sum(n == c.node_id for *_, n in _ledger(ledger)) >= 5, "episodes from c", thread)
    trainer.stop.request()  # as a SIGTERM would: finish the update, checkpoint, return
    thread.join(120)
    assert not thread.is_alive() and result, "the run did not complete"
    assert trainer.stopped == "SIGTERM"

    counts, stored = _stored(tmp_path / "run")
    assert max(counts.values()) == 1, [e for e, n in counts.items() if n > 1]  # exactly once
    shipped = _ledger(ledger)
    assert len({e for e, *_ in shipped}) == len(shipped)  # no group shipped an episode twice
    for episode_id, reason, _, _ in shipped:  # nothing a group shipped was lost
        assert episode_id in stored, episode_id
        assert stored[episode_id][0] == reason
    lost = {e: s for e, s in stored.items() if s[1] == "node_lost"}
    assert lost, "no episode was running on the removed node"
    assert {node for _, _, node in lost.values()} == {b.node_id}
    assert not set(lost) & {e for e, *_ in shipped}  # lost ones were never shipped complete
    assert result["truncated"] == len(lost)
    acted = {
        v
        for shard in (tmp_path / "run" / "trajectories").glob("*.parquet")
        for v in pq.ParquetFile(shard).read(columns=["policy_version"]).column(0).to_pylist()
        if v is not None
    }
    assert max(acted) > 1  # groups acted with the versions the trainer published
    assert result["version"] > 1 and trainer.state.iteration == result["version"]


def test_finished_episodes_leave_their_node_before_the_verdict(cluster, tmp_path: Path) -> None:
    """A VLM judge that does not answer while node a runs: the episodes finished there left it
    unjudged and wait on the learner for their verdict when the node is removed. The learner's
    judging stage labels each once the judge answers again, and stores it once (not
    truncated); the run goes on with a group on node b."""
    import json

    from judge_helpers import verdict_text

    from devicerl.runtime.loop.factory import make_trainer
    from devicerl.testing.chat_server import Reply, ScriptedChatServer

    gate = threading.Event()

    def respond(body: dict) -> Reply:
        gate.wait(120)  # verdicts stay pending until node a is gone
        return Reply(verdict_text(True))

    a = _add(cluster, "node_a")
    ledger = tmp_path / "run" / "rollouts-ledger.tsv"
    with ScriptedChatServer(respond) as srv:
        cfg = _config(
            tmp_path,
            1,
            200,
            f"cluster.address={cluster.address}",
            "env.options={render: true, screen: [64, 64], step_latency: 0.03, reset_latency: 0.05}",
            "judge.kind=vlm",
            "judge.chat.model=judge-model",
            f"judge.chat.base_url={srv.base_url}",
            "judge.vlm.cache_path=",  # every verdict from the server (a cache would answer)
        )
        trainer = make_trainer(cfg, RunDir(tmp_path / "run"))
        result: dict = {}
        thread = threading.Thread(target=lambda: result.update(trainer.run()), daemon=True)
        thread.start()

        def shipped_from_a() -> set[str]:
            return {e for e, _, _, n in _ledger(ledger) if n == a.node_id}

        _wait(lambda: len(shipped_from_a()) >= 4, "finished episodes shipped from a", thread)
        waiting = shipped_from_a()
        assert trainer.state.episodes == 0  # none has its verdict yet
        cluster.cluster.remove_node(a, allow_graceful=False)
        b = _add(cluster, "node_b")
        _wait(lambda: any(n == b.node_id for *_, n in _ledger(ledger)), "a group on b", thread)
        gate.set()
        thread.join(180)
        assert not thread.is_alive() and result, "the run did not complete"

    counts, stored = _stored(tmp_path / "run")
    assert max(counts.values()) == 1, [e for e, n in counts.items() if n > 1]  # exactly once
    shipped = {e for e, *_ in _ledger(ledger)}
    assert shipped <= set(stored)  # everything that left a group is stored
    assert any(node == b.node_id for *_, node in stored.values())  # the run went on on b
    rows = {}
    for shard in sorted((tmp_path / "run" / "trajectories").glob("*.parquet")):
        cols = ["episode_id", "is_final", "judgement", "success"]
        for row in pq.ParquetFile(shard).read(columns=cols).to_pylist():
            if row["is_final"]:
                rows[row["episode_id"]] = row
    for e in waiting:  # finished on the lost node before their verdict: judged on the learner
        reason, cause, node = stored[e]
        judgement = json.loads(rows[e]["judgement"])
        assert node == a.node_id and cause is None and reason == "success", (e, stored[e])
        assert judgement["verdict"]["label"] == "success"
    assert trainer.state.unlabelled == 0


def test_cluster_up_local_starts_nodes_with_group_slots(monkeypatch) -> None:
    """``devicerl cluster up --local 1`` prints an address a run can join, with one
    rollout-group slot per worker node, and stops on Ctrl-C."""
    import os
    import signal
    import subprocess
    import sys

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    cmd = [sys.executable, "-m", "devicerl.cli.main", "cluster", "up", "--local", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("address: "), line
        ray.init(address=line.split()[1], log_to_driver=False)
        alive = [n for n in ray.nodes() if n["Alive"]]
        assert len(alive) == 2
        assert sum(n["Resources"].get("devicerl_group", 0) for n in alive) == 1
        ray.shutdown()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=180)  # Ray's shutdown of two nodes; slow on a busy host
        assert proc.returncode == 0 and "cluster stopped" in out
    finally:
        ray.shutdown()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_weights_travel_as_one_object_per_version(tmp_path: Path, monkeypatch) -> None:
    """Two groups, three published versions of a small agent's weights: three objects put
    into Ray's store (not one per group), and both groups end up acting with the newest."""
    from devicerl.agents.factory import AgentSpec
    from devicerl.records import DEFAULT_POLICY
    from devicerl.runtime.acting.copies import Published
    from devicerl.runtime.cluster.fleet import RolloutFleet

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert not ray.is_initialized()
    cfg = _config(
        tmp_path, 2, 10_000, "rollouts.resources={}", "agent.kind=small", "env.num_envs=2"
    )
    spec = AgentSpec(kind="small")
    weights = spec.make().get_weights()

    def roster(version: int) -> dict[str, Published]:
        moved = {k: v + 0.01 * (version - 1) for k, v in weights.items()}
        return {DEFAULT_POLICY: Published(moved, version, spec.make)}

    fleet = RolloutFleet(cfg, version=1, roster=roster(1), init_kwargs={"num_cpus": 2})
    try:
        fleet.start()
        newest: dict[int, int] = {}  # group -> newest version seen on a whole episode
        for version in (2, 3):
            fleet.publish(roster(version), version)
        end = time.monotonic() + 120
        while newest != {0: 3, 1: 3}:
            assert time.monotonic() < end, newest
            t = fleet.get(timeout=1.0)
            if t is not None and t.steps:
                assert min(s.policy_version for s in t.steps) >= 1
                g = t.extras["rollout_group"]
                newest[g] = max(newest.get(g, 0), min(s.policy_version for s in t.steps))
        assert fleet.counters["weights_put"] == 3
        assert fleet.counters["duplicates"] == 0
    finally:
        fleet.stop()
    assert not ray.is_initialized()  # the fleet started Ray, so it stopped it


def test_group_devices_cannot_be_ray_actors_elsewhere(tmp_path: Path) -> None:
    from devicerl.errors import ConfigError

    with pytest.raises(ConfigError, match=r"rollouts\.groups: a group runs its devices"):
        _config(tmp_path, 2, 100, "env.worker=ray")
    with pytest.raises(ConfigError, match=r"rollouts\.groups"):
        _config(tmp_path, -1, 100)
