"""Population-based training inside a league, with real small agents."""

from __future__ import annotations

import collections

import pytest

from devicerl.league.config import PBT_PERTURBATION, PBT_RESAMPLE, LeagueConfig, PBTConfig
from devicerl.league.hparams import get_hparams
from devicerl.league.pbt import PBT, quantiles
from devicerl.league.state import League, weights_hash
from tests.league_helpers import nudge, tiny_spec

NAMES = ["actor_lr", "top_p", "epsilon"]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_quantiles_follow_ray_tune() -> None:
    ranked = [f"m{i}" for i in range(8)]
    assert quantiles(ranked, 0.25) == (["m0", "m1"], ["m6", "m7"])
    assert quantiles(ranked[:4], 0.25) == (["m0"], ["m3"])  # ceil(4 x 0.25) = 1
    assert quantiles(ranked[:3], 0.5) == (["m0"], ["m2"])  # ceil(1.5) = 2 > 3/2 -> 1
    assert quantiles(ranked[:1], 0.25) == ([], [])


def _population(n: int = 4, seed: int = 0) -> tuple[League, PBT]:
    config = PBTConfig(policy="gen", population=n, interval=2)
    league = League.build({"gen": tiny_spec("*")}, LeagueConfig(pbt=config))
    driver = PBT(league, config, seed=seed)
    driver.populate()
    return league, driver


def test_population_members_are_independent_copies_with_their_own_hparams() -> None:
    league, pbt = _population()
    assert pbt.members == ["gen", "gen.pbt1", "gen.pbt2", "gen.pbt3"]
    hps = [get_hparams(league[m].spec, NAMES) for m in pbt.members]
    assert len({tuple(h.values()) for h in hps}) == 4
    for h in hps[1:]:
        assert 1e-5 <= h["actor_lr"] <= 1e-3 and 0.05 <= h["top_p"] <= 0.5
    # the live agent acts with its member's exploration
    assert league["gen.pbt1"].policy.config.epsilon == hps[1]["epsilon"]
    ptrs = [{p.data_ptr() for p in league[m].policy.parameters()} for m in pbt.members]
    assert not ptrs[0] & ptrs[1]
    # episodes split evenly among the members
    counts = collections.Counter(league.assign("any-task") for _ in range(4000))
    assert set(counts) == set(pbt.members) and min(counts.values()) > 850


def test_exploit_copies_weights_and_hparams_without_aliasing(monkeypatch) -> None:
    monkeypatch.setattr("devicerl.league.pbt.PBT_RESAMPLE", 0.0)  # always perturbed
    league, pbt = _population()
    for i, m in enumerate(pbt.members):
        nudge(league[m].policy, 0.01 * (i + 1))  # four different weight sets
    scores = {"gen": 0.1, "gen.pbt1": 0.9, "gen.pbt2": 0.5, "gen.pbt3": 0.4}
    donor_hash = weights_hash(league["gen.pbt1"].policy)
    donor_hp = get_hparams(league["gen.pbt1"].spec, NAMES)
    others = {m: weights_hash(league[m].policy) for m in ("gen.pbt2", "gen.pbt3")}
    league.iteration = 1
    assert pbt.step(scores) == []  # not an exploit iteration
    league.iteration = 2
    (event,) = pbt.step(scores)  # 4 members x 0.25: one loser, one winner
    assert (event["target"], event["donor"]) == ("gen", "gen.pbt1")
    target = league["gen"]
    assert weights_hash(target.policy) == donor_hash
    assert event["donor_hparams"] == donor_hp
    new = get_hparams(target.spec, NAMES)
    for name in NAMES:  # perturbed x0.8 or x1.2 (clipped into the field's range)
        ratio = new[name] / donor_hp[name] if donor_hp[name] else 1.0
        assert ratio == pytest.approx(0.8) or ratio == pytest.approx(1.2), (name, ratio)
    assert target.spec.digirl is not league["gen.pbt1"].spec.digirl
    assert get_hparams(league["gen.pbt1"].spec, NAMES) == donor_hp  # the donor is untouched
    assert {m: weights_hash(league[m].policy) for m in others} == others
    # no aliasing: training the donor further leaves the exploiter's copy alone, and back
    nudge(league["gen.pbt1"].policy)
    assert weights_hash(target.policy) == donor_hash
    nudge(target.policy, 0.5)
    assert weights_hash(league["gen.pbt1"].policy) != weights_hash(target.policy)
    assert league["gen"].policy.version == 1
    assert [e["event"] for e in league.history] == ["exploit"]


def test_perturb_resamples_with_its_probability() -> None:
    assert PBT_RESAMPLE == 0.25 and PBT_PERTURBATION == (0.8, 1.2)  # Ray Tune's defaults
    _, pbt = _population(seed=5)
    values = {"actor_lr": 1e-4, "top_p": 0.2, "epsilon": 0.1}
    perturbed = resampled = 0
    for _ in range(2000):
        out = pbt.perturb(values)
        for name, v in out.items():
            ratio = v / values[name]
            if ratio == pytest.approx(0.8) or ratio == pytest.approx(1.2):
                perturbed += 1
            else:
                resampled += 1
    assert 0.22 < resampled / (perturbed + resampled) < 0.28


def test_exploit_uses_windowed_success_by_default() -> None:
    league, pbt = _population(n=2)
    for i in range(10):
        league.record("gen", "t", i < 2)
        league.record("gen.pbt1", "t", i < 9)
    league.iteration = 2
    (event,) = pbt.step()
    assert (event["target"], event["donor"]) == ("gen", "gen.pbt1")
    assert league.success.rate("gen", "t") == pytest.approx(0.9)  # windows restart from donor
