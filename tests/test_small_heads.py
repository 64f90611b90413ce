"""The small agent's heads are parts: a new head is its own class plus one registration line.

`Hello` below is a throwaway head: a TYPE action that types "hello", one more option of the
text's source (its logit from a layer of its own), no choice of its own. Registered in one line
(as a head in ``devicerl/agents/small/registry.py`` is), a run option names it, the agent
builds it after every other part (so the others start as they would without it), samples it,
scores it (summed with every other path that types "hello"), trains it, saves and loads it.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from devicerl.actions import Action, ActionType
from devicerl.agents.small import SmallAgent
from devicerl.agents.small.config import SmallAgentOptions
from devicerl.agents.small.heads.base import Head, Target
from devicerl.agents.small.registry import HEADS, HeadEntry
from devicerl.records import Observation, UIElement, with_previous_actions


class Hello(Head):
    """Types "hello"."""

    name = "hello"
    action_type = ActionType.TYPE
    options = ("hello",)

    def build(self, host: nn.Module) -> None:
        self.logit = self.attach(host, "hello_option", nn.Linear(self.cfg.d_model, 1))

    def option_logits(self, g: torch.Tensor) -> torch.Tensor:
        return self.logit(g)

    def available(self, x) -> torch.Tensor:
        return x.enc.instr_mask.new_ones(x.enc.instr_mask.shape[0], 1)

    def forward(self, x) -> None:
        return None

    def sample(self, x, dist, chosen, draw, early) -> None:
        return None

    def action(self, meta, option, drawn, b) -> tuple[Action, dict]:
        return Action.type_text("hello"), {}

    def paths(self, meta, action: Action) -> list[Target]:
        return [Target("hello")] if action == Action.type_text("hello") else []

    def extend(self, dist, ready, b, target, prior) -> torch.Tensor:
        return prior


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(HEADS, "hello", HeadEntry(f"{__name__}:Hello", 'types "hello"'))


def _form(word: str) -> Observation:
    box = UIElement("in", "textbox", "", bbox=(10, 10, 110, 30), editable=True, focused=True)
    return Observation(f'Type "{word}" then press Submit', (160, 210), elements=[box])


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_a_registered_head_samples_scores_trains_and_saves(registered, tmp_path) -> None:
    options = SmallAgentOptions(d_model=32, allowed_types=("TYPE",), heads=("hello",))
    agent = SmallAgent(options.architecture(seed=2), epsilon=0.3)
    plain = SmallAgent(
        SmallAgentOptions(d_model=32, allowed_types=("TYPE",), heads=()).architecture(seed=2)
    )
    # built last: every other weight starts as it would without it
    own, before = agent.module.state_dict(), plain.module.state_dict()
    assert set(own) - set(before) == {
        "hello_option.weight",
        "hello_option.bias",
        "source_head.weight",
        "source_head.bias",
    }
    assert all(torch.equal(v, own[k]) for k, v in before.items())
    # samples: the text's source is now drawn among the instruction's spans and "hello"
    obs = [_form(w) for w in ("blue", "sky", "hello", "red")] * 8
    samples = agent.act(obs)
    sources = {s.extras["source"] for s in samples}
    assert sources == {"instruction", "hello"}
    assert all(s.action.text == "hello" for s in samples if s.extras["source"] == "hello")
    # scores: the log-prob it reports is the one log_prob computes, summed over paths ("hello"
    # is also a span of the third instruction)
    lp = agent.log_prob(obs, [s.action for s in samples])
    assert torch.allclose(lp, torch.tensor([s.log_prob for s in samples]), atol=1e-5)
    both = agent.targets(agent.featurize([obs[2]]).meta[0], Action.type_text("hello"))
    assert both.exact and {p.option for _, p in both.paths} == {"instruction", "hello"}
    # trains: imitating "hello" everywhere makes it the greedy action
    hello = Action.type_text("hello")
    opt = torch.optim.Adam(agent.parameters(), lr=1e-2)
    agent.train()
    for _ in range(30):
        loss = -agent.log_prob(obs, [hello] * len(obs)).mean()
        opt.zero_grad()
        loss.backward()
        assert agent.module.hello_option.weight.grad.abs().sum() > 0
        opt.step()
    agent.eval()
    assert {s.action for s in agent.act(obs, greedy=True)} == {hello}
    # saves and loads like any other part
    agent.save(tmp_path / "hello")
    back = SmallAgent.from_pretrained(tmp_path / "hello")
    assert back.config.heads == ("hello",)
    assert torch.equal(
        back.log_prob(obs, [hello] * len(obs)), agent.log_prob(obs, [hello] * len(obs))
    )


def test_an_unregistered_head_is_a_one_line_error() -> None:
    from devicerl.errors import ConfigError

    with pytest.raises(ConfigError, match=r"agent\.small\.heads: 'hello' is not one of") as e:
        SmallAgentOptions(heads=("hello",)).validate()
    assert "\n" not in str(e.value)


def test_actions_of_types_beyond_its_type_head_score_unrepresentable_and_featurize() -> None:
    """LONG_PRESS, OPEN_APP, WAIT and ANSWER are not among a saved agent's seven type classes:
    such an action (a stored step, a demonstration) scores `UNREPRESENTABLE_LOG_PROB` like any
    other action the agent cannot produce, and as the previous action it sets none of the
    last-type columns (nor "no action")."""
    from devicerl.actions import AITW_TYPES
    from devicerl.agents.small import UNREPRESENTABLE_LOG_PROB
    from devicerl.agents.small.columns import HistoryColumns

    agent = SmallAgent(SmallAgentOptions(d_model=32).architecture(seed=1))
    newer = [
        Action.long_press(0.4, 0.2),
        Action.open_app("Clock"),
        Action.wait(),
        Action.answer("blue"),
    ]
    assert not {a.type for a in newer} & set(AITW_TYPES)
    obs = [_form("blue")] * len(newer)
    lp = agent.log_prob(obs, newer)
    assert lp.tolist() == [UNREPRESENTABLE_LOG_PROB] * len(newer)
    found = agent.targets(agent.featurize(obs[:1]).meta[0], Action.wait())
    assert not found.exact and found.note == "not one of the type head's classes"
    # after an action of a newer type: the history row has no type column set, and acting and
    # scoring go on
    cols = HistoryColumns.of(AITW_TYPES)
    after = [with_previous_actions(o, [a]) for o, a in zip(obs, newer)]
    rows = agent.featurize(after).history
    assert rows[:, cols.last_type.start : cols.last_type.stop].abs().sum() == 0
    assert rows[:, cols.no_action].abs().sum() == 0 and (rows[:, cols.count] > 0).all()
    samples = agent.act(after)
    assert all(s.action.type in AITW_TYPES for s in samples)
    assert torch.allclose(
        agent.log_prob(after, [s.action for s in samples]),
        torch.tensor([s.log_prob for s in samples]),
        atol=1e-5,
    )
