"""League config, routing, frontier sampling, snapshots and the regression gate, with real
small agents (the league run in the trainer's loop: tests/test_league_run.py)."""

from __future__ import annotations

import collections

import pytest

from devicerl.config import from_dict
from devicerl.errors import ConfigError
from devicerl.league.config import (
    GATE_MARGIN,
    MAX_SNAPSHOTS,
    LeagueConfig,
    LeagueRunConfig,
    MappingRule,
    SnapshotConfig,
)
from devicerl.league.frontier import FrontierSampler
from devicerl.league.mapping import PolicyMapping
from devicerl.league.state import Frozen, League, weights_hash
from devicerl.league.success import SuccessTable
from devicerl.league.table import league_table
from tests.league_helpers import nudge, observations, tiny_spec

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_config_loads_policies_and_names_the_bad_key() -> None:
    cfg = from_dict(
        LeagueRunConfig,
        {
            "policies": {
                "gen": {"tasks": "*"},
                "clicks": {"tasks": "click-*", "actor": {"lr": 3e-4}},
                "old": {"agent": {"kind": "random"}, "trainable": False, "algo": "none"},
            },
            "league": {"mapping": [{"policy": "clicks", "tasks": "click-*", "weight": 2}]},
        },
    )
    assert cfg.policies["clicks"].actor.lr == 3e-4
    assert cfg.policies["clicks"].covers("click-button") and not cfg.policies["clicks"].covers("x")
    assert cfg.league.snapshot.threshold == 0.8 and cfg.league.pbt.population == 4
    bad = [
        ({"policies": {"g": {"digirl": {"top_p": 2}}}}, "policies.g.digirl.top_p=2"),
        ({"policies": {"g": {"trainabel": True}}}, "'policies.g.trainabel'"),
        ({"policies": {"g": {"algo": "none"}}}, "policies.g.algo"),
        ({"policies": {"g b": {}}}, "policies.g b"),
        ({"policies": {}}, "policies:"),
        ({"policies": {"g": {}}, "league": {"mapping": [{"policy": "x"}]}}, "mapping[0].policy"),
        ({"policies": {"g": {"learn_from": ["s"]}}}, "policies.g.learn_from"),
        ({"policies": {"g": {}}, "league": {"pbt": {"policy": "h"}}}, "league.pbt.policy"),
        ({"policies": {"g": {}}, "league": {"pbt": {"quantile": 0.7}}}, "league.pbt.quantile"),
        (
            {"policies": {"g": {}}, "league": {"pbt": {"hyperparams": {"lr": [1, 2]}}}},
            "league.pbt.hyperparams",
        ),
        ({"policies": {"g": {}}, "league": {"snapshot": {"threshold": 1.5}}}, "threshold=1.5"),
    ]
    for data, key in bad:
        with pytest.raises(ConfigError) as err:
            from_dict(LeagueRunConfig, data)
        assert key in str(err.value) and "\n" not in str(err.value), (data, str(err.value))


def test_episodes_are_routed_by_glob_and_weight() -> None:
    rules = [
        MappingRule("clicks", "click-*", 3.0),
        MappingRule("gen", "*", 1.0),
        MappingRule("forms", "login-*"),
    ]
    mapping = PolicyMapping(rules, seed=1)
    counts = collections.Counter(mapping.assign("click-button") for _ in range(4000))
    assert set(counts) == {"clicks", "gen"}
    assert 0.72 < counts["clicks"] / 4000 < 0.78  # 3 : 1
    assert {mapping.assign("enter-text") for _ in range(50)} == {"gen"}
    assert mapping.tasks_of("forms", ["login-user", "click-x"]) == ["login-user"]
    mapping.remove_policy("gen")
    with pytest.raises(ConfigError, match="enter-text"):
        mapping.assign("enter-text")
    # default mapping: each trainable policy plays its own cluster
    policies = {"a": tiny_spec("click-*"), "b": tiny_spec("*"), "f": tiny_spec(trainable=False)}
    default = PolicyMapping.from_policies(policies)
    assert {r.policy for r in default.candidates("click-1")} == {"a", "b"}
    assert {r.policy for r in default.candidates("type-1")} == {"b"}


def test_frontier_weights_are_x_one_minus_x_plus_floor() -> None:
    table = SuccessTable(task_window=10)
    for task, wins in {"solved": 10, "half": 5, "hopeless": 0, "most": 8}.items():
        for i in range(10):
            table.record("p", task, i < wins)
    sampler = FrontierSampler(table, floor=0.05, seed=3)
    tasks = ["solved", "half", "hopeless", "most", "new"]
    w = dict(zip(tasks, sampler.weights("p", tasks)))
    assert w == pytest.approx(
        {"solved": 0.05, "half": 0.3, "hopeless": 0.05, "most": 0.16 + 0.05, "new": 0.3}
    )
    probs = dict(zip(tasks, sampler.probabilities("p", tasks)))
    draws = collections.Counter(sampler.sample("p", tasks) for _ in range(20000))
    for t in tasks:
        assert abs(draws[t] / 20000 - probs[t]) < 0.015, (t, draws[t], probs[t])
    # another policy's table is its own: nothing played yet -> uniform
    assert sampler.probabilities("q", tasks) == pytest.approx([0.2] * 5)
    # floor 0 and only solved/hopeless tasks: uniform rather than a division by zero
    assert FrontierSampler(table, floor=0).probabilities("p", ["solved", "hopeless"]) == [0.5] * 2


def test_snapshot_is_a_deep_copy_unaffected_by_later_updates() -> None:
    league = League.build({"gen": tiny_spec()})
    gen = league["gen"].policy
    snap = league.snapshot("gen")
    assert isinstance(snap.policy, Frozen) and not snap.spec.trainable
    before = weights_hash(snap.policy)
    assert before == weights_hash(gen)
    live = {p.data_ptr() for p in gen.parameters()}
    assert not live & {p.data_ptr() for p in snap.policy.inner.parameters()}  # no shared storage
    nudge(gen)
    gen.set_weights({k: v * 0.5 for k, v in gen.get_weights().items()})
    assert weights_hash(gen) != before
    assert weights_hash(snap.policy) == before
    with pytest.raises(ConfigError, match="frozen"):
        snap.policy.set_weights(gen.get_weights())
    assert weights_hash(snap.policy) == before


def test_frozen_policy_weights_never_change_while_it_acts() -> None:
    league = League.build({"gen": tiny_spec(), "old": tiny_spec(trainable=False, seed=1)})
    frozen = league["old"].policy
    assert isinstance(frozen, Frozen) and "old" not in league.trainable()
    before = weights_hash(frozen)
    obs = observations(4)
    for i in range(5):
        assert len(frozen.act(obs, greedy=bool(i % 2))) == 4
        frozen.log_prob(obs, [s.action for s in frozen.act(obs)]).sum()  # teacher scoring
    assert weights_hash(frozen) == before
    assert not frozen.log_prob(obs, [s.action for s in frozen.act(obs)]).requires_grad


def test_add_and_remove_policies_mid_run() -> None:
    league = League.build({"gen": tiny_spec(), "clicks": tiny_spec("click-*")})
    assert league.assign("type-text") == "gen"
    for _ in range(3):
        league.record("clicks", "click-a", True)
    league.end_iteration()
    league.add_member("forms", tiny_spec("login-*"), tiny_spec().agent.make(), teachers=["gen"])
    league.add_rule("forms", "login-*", weight=1e6)
    assert league.assign("login-user") == "forms"
    assert league["forms"].created_iteration == 1
    league.record("forms", "login-user", True)
    removed = league.remove("clicks")
    assert removed.name == "clicks" and "clicks" not in league
    assert {league.assign("click-a") for _ in range(20)} == {"gen"}  # its rule went with it
    assert league.success.rate("clicks", "click-a") is None
    league.record("clicks", "click-a", True)  # an episode that was in flight: dropped
    assert league.success.rate("clicks", "click-a") is None
    league.remove("gen")
    assert league["forms"].teachers == []
    assert league.counters == {"snapshots": 0, "added": 3, "removed": 2}
    with pytest.raises(ConfigError, match="already"):
        league.add_member("forms", tiny_spec(), tiny_spec().agent.make())
    with pytest.raises(ConfigError, match="not in the league"):
        league.remove("gen")


def test_snapshot_when_windowed_success_crosses_the_threshold() -> None:
    config = LeagueConfig(snapshot=SnapshotConfig(threshold=0.8, window=10))
    league = League.build({"gen": tiny_spec()}, config)
    for i in range(10):
        league.record("gen", "t", i < 7)  # 0.7
    assert league.end_iteration() == []
    for i in range(10):
        league.record("gen", "t", i < 8)  # 0.8 over the last 10
    assert league.end_iteration() == ["gen@2"]
    assert league.end_iteration() == []  # the window restarts after a snapshot
    names = []
    for _ in range(3):
        for _ in range(10):
            league.record("gen", "t", True)
        names += league.end_iteration()
    assert names == ["gen@4", "gen@5", "gen@6"]
    assert MAX_SNAPSHOTS == 3
    assert league.snapshots_of("gen") == ["gen@4", "gen@5", "gen@6"]  # oldest removed beyond 3
    assert [e["snapshot"] for e in league.history] == ["gen@2", "gen@4", "gen@5", "gen@6"]
    assert "gen@2" not in league


def test_regression_gate_and_league_table() -> None:
    assert GATE_MARGIN == 0.1
    config = LeagueConfig(generalist="gen", snapshot=SnapshotConfig(window=4))
    league = League.build(
        {"gen": tiny_spec(learn_from=["clicks"]), "clicks": tiny_spec("click-*")}, config
    )
    for _ in range(4):
        league.record("clicks", "click-a", True)
        league.record("gen", "click-b", True)
    league.end_iteration()  # both policies at 1.0 over 4 episodes: two snapshots
    assert sorted(m for m in league.members if "@" in m) == ["clicks@1", "gen@1"]
    for i in range(8):
        league.record("gen", "click-a", i < 4)  # 0.5 vs clicks@1's 1.0
        league.record("gen", "click-b", i < 6)  # 10 of 12: 0.83 vs gen@1's 1.0 (gap > 0.1)
    report = league.regression_report()
    assert [(r["task"], r["snapshot"]) for r in report] == [
        ("click-a", "clicks@1"),
        ("click-b", "gen@1"),
    ]
    assert report[0]["gap"] == pytest.approx(0.5)
    assert league.regression_report(margin=0.2)[0]["task"] == "click-a"
    assert len(league.regression_report(margin=0.2)) == 1
    assert league.destinations("clicks") == ["clicks", "gen"]  # the generalist learns from it
    assert league.destinations("gen") == ["gen"]
    assert league.destinations("gen@1") == []  # a frozen snapshot's episodes train no one
    league["gen"].teachers.append("clicks@1")
    assert league.destinations("clicks@1") == ["gen"]  # ... unless it is someone's teacher
    league["gen"].teachers.remove("clicks@1")
    text = league_table(league)
    assert "clicks -> gen" in text and "clicks@1 (of clicks)" in text
    assert "regression gate: click-a 0.50 < clicks@1 1.00" in text
    row = next(line for line in text.splitlines() if line.startswith("gen "))
    assert "0.50 (8)" in row
