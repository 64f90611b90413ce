"""Per-policy batched inference over the ready devices (real small agents)."""

from __future__ import annotations

import pytest
import torch

from devicerl.errors import ConfigError
from devicerl.league.acting import POLICY_KEY, act_per_policy
from devicerl.league.config import LeagueConfig, MappingRule
from devicerl.league.state import League, weights_hash
from tests.league_helpers import observations, tiny_spec


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


class Counting:
    """Counts the batched calls a policy receives (wraps its real `act`)."""

    def __init__(self, policy) -> None:
        self.calls: list[int] = []
        self.act = policy.act
        policy.act = self

    def __call__(self, obs, greedy=False):
        self.calls.append(len(obs))
        return self.act(obs, greedy)


def test_one_batched_call_per_policy_and_samples_name_their_policy() -> None:
    rules = [MappingRule("clicks", "click-*"), MappingRule("gen", "type-*")]
    league = League.build(
        {"gen": tiny_spec(), "clicks": tiny_spec("click-*", seed=1), "old": tiny_spec(seed=2)},
        LeagueConfig(mapping=rules),
    )
    league.snapshot("old")
    league["old"].policy.version = 7
    tasks = {0: "click-a", 1: "type-b", 2: "click-c", 3: "type-d", 4: "click-e"}
    assignments = {i: league.assign(t) for i, t in tasks.items()}
    assignments[5] = "old@0"  # a frozen snapshot playing a gate episode
    obs = dict(enumerate(observations(6)))
    counters = {n: Counting(league[n].policy) for n in ("gen", "clicks", "old@0")}
    frozen_hash = weights_hash(league["old@0"].policy)
    samples = act_per_policy(league, obs, assignments)
    assert sorted(samples) == list(range(6))
    assert {i: s.extras[POLICY_KEY] for i, s in samples.items()} == {
        0: "clicks",
        1: "gen",
        2: "clicks",
        3: "gen",
        4: "clicks",
        5: "old@0",
    }
    assert {n: c.calls for n, c in counters.items()} == {
        "gen": [2], "clicks": [3], "old@0": [1]
    }  # fmt: skip
    assert samples[5].extras["policy_version"] == 0  # the snapshot's own version
    assert weights_hash(league["old@0"].policy) == frozen_hash
    # greedy: the same policy, observation and weights give the same action wherever it sits
    a = act_per_policy(league, {0: obs[0]}, {0: "clicks"}, greedy=True)[0].action
    b = act_per_policy(league, obs, assignments, greedy=True)[0].action
    assert a == b


def test_unknown_or_missing_policies_fail_naming_the_device() -> None:
    league = League.build({"gen": tiny_spec()})
    obs = dict(enumerate(observations(2)))
    with pytest.raises(ConfigError, match="device 1: its episode has no policy"):
        act_per_policy(league, obs, {0: "gen"})
    with pytest.raises(ConfigError, match="device 1: policy 'gone'"):
        act_per_policy(league, obs, {0: "gen", 1: "gone"})
