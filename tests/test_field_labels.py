"""Field labels (`FeatureConfig.field_labels`): which words name a text field, which instruction
tokens belong to the field typed into, and that a policy can use them to type each value into
its own field when the instruction names the fields in an order it never saw."""

import random

import torch

from devicerl.actions import Action
from devicerl.agents.small import SmallAgent
from devicerl.agents.small.columns import ELEM_FIELD, INSTR_FIELD
from devicerl.agents.small.config import FeatureConfig
from devicerl.agents.small.featurize import featurize
from devicerl.agents.small.field_labels import field_labels, mentions, token_rows
from devicerl.agents.small.tokenize import split_words
from devicerl.records import Observation, UIElement

_USERS = ["kasie", "joye", "cheree", "lyda", "bernardine", "tomas", "ivy", "olga"]
_LEADS = ["", "Now ", "Please now ", "Next, please "]
_HELD_OUT = ["renda", "sergio", "jess", "cristin", "adah", "milo", "pearl", "zane"]


def _login(instruction: str, focused: int | None, previous: list[Action] | None = None):
    """The login-user page: a label above each (empty) text box, then a button."""
    elements = [
        UIElement("l1", "label", "Username", bbox=(7, 58, 70, 74)),
        UIElement("u", "textbox", "", bbox=(7, 78, 135, 99), editable=True, focused=focused == 0),
        UIElement("l2", "label", "Password", bbox=(7, 110, 70, 126)),
        UIElement("p", "textbox", "", bbox=(7, 130, 115, 151), editable=True, focused=focused == 1),
        UIElement("b", "button", "Login", bbox=(7, 160, 60, 180), clickable=True),
    ]
    return Observation(
        instruction, (160, 210), elements=elements, previous_actions=tuple(previous or ())
    )


def test_a_field_is_named_by_its_placeholder_or_the_short_text_beside_it() -> None:
    obs = _login("x", None)
    assert field_labels(obs.elements) == [[], ["username"], [], ["password"], []]
    left = UIElement("l", "span", "First name:", bbox=(0, 10, 40, 30))
    box = UIElement("f", "textbox", "", bbox=(45, 12, 140, 28), editable=True)
    far = UIElement("g", "textbox", "", bbox=(45, 200, 140, 216), editable=True)
    hinted = UIElement("h", "textbox", "", bbox=(45, 40, 140, 56), editable=True,
                       attrs={"placeholder": "Search"})  # fmt: skip
    long_text = UIElement("t", "div", "a paragraph of many words above it", bbox=(0, 170, 160, 195))
    assert field_labels([left, box, far, hinted, long_text]) == [
        [], ["first", "name"], [], ["search"], []
    ]  # fmt: skip


def test_tokens_after_the_typed_fields_label_are_marked() -> None:
    words = [w.lower() for w, _, _ in split_words('Enter the username "kasie", the password "x7".')]
    labels = [["username"], ["password"]]
    rows = token_rows(labels, words, target=1)
    assert [w for w, r in zip(words, rows) if r[0]] == ['"', "x7", '"', "."]
    assert [w for w, r in zip(words, rows) if r[1]] == ['"', "kasie", '"', ","]
    assert token_rows(labels, words, target=None)[4] == [0.0, 1.0]
    assert mentions(["movies", "directed", "by", "blevins"], ["director"]) == [1]
    assert mentions(["both", "password", "fields"], ["verify", "password"]) == [1]


def test_featurize_appends_the_columns_and_finds_the_field_without_dom_flags() -> None:
    instr = 'Enter the username "kasie" and the password "x7" and press login.'
    on, off = FeatureConfig(field_labels=True), FeatureConfig()
    assert on.instr_features == off.instr_features + INSTR_FIELD
    assert on.elem_features == off.elem_features + ELEM_FIELD
    batch = featurize([_login(instr, focused=1)], on)
    assert batch.instr_feats.shape[-1] == on.instr_features
    kasie, x7 = 5, 12  # token indices
    assert batch.instr_feats[0, x7, -2] == 1 and batch.instr_feats[0, kasie, -1] == 1
    assert batch.instr_feats[0, kasie, -2] == 0
    assert batch.elem_feats[0, 1, -2] == 1 and batch.elem_feats[0, 0, -2] == 0
    # With DOM flags off nothing is known focused: the field is the one the last action tapped.
    tapped = Action.tap(71 / 160, 88.5 / 210)
    flagless = FeatureConfig(field_labels=True, dom_flags=False)
    batch = featurize([_login(instr, focused=1, previous=[tapped])], flagless)
    assert batch.instr_feats[0, kasie, -2] == 1 and batch.instr_feats[0, x7, -2] == 0


def _typing_accuracy(labels: bool, seed: int = 0) -> float:
    """Imitate typing into the focused field of `... username "U" and the password "P" ...`
    (after a lead-in of 0-3 words), then type greedily (held-out names) when the instruction
    names the password first: the share of logins with the right value in both fields."""
    torch.manual_seed(seed)
    rng = random.Random(seed)
    features = FeatureConfig(field_labels=labels)
    agent = SmallAgent(d_model=64, seed=seed + 1, allowed_types=("TYPE",), features=features)
    seen = 'Enter the username "{}" and the password "{}" into the text fields and press login.'
    swapped = 'Enter the password "{1}" and the username "{0}" into the text fields, press login.'
    opt = torch.optim.Adam(agent.parameters(), lr=3e-3)
    agent.train()
    for _ in range(60):
        obs, acts = [], []
        for _ in range(16):
            user, pw, field = rng.choice(_USERS), rng.choice(_USERS), rng.randrange(2)
            lead = rng.choice(_LEADS)  # moves the values: no fixed index to point at
            obs.append(_login(lead + seen.format(user, pw), focused=field))
            acts.append(Action.type_text((user, pw)[field]))
        loss = -agent.log_prob(obs, acts).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    agent.eval()
    pairs = list(zip(_HELD_OUT, reversed(_HELD_OUT)))
    right = [True] * len(pairs)
    for field in (0, 1):
        acts = agent.act([_login(swapped.format(u, p), focused=field) for u, p in pairs], True)
        for k, (s, pair) in enumerate(zip(acts, pairs)):
            right[k] &= s.action.text == pair[field]
    return sum(right) / len(pairs)


def test_field_labels_type_each_value_into_its_own_field_in_an_unseen_order() -> None:
    """Without labels nothing ties a box to its name in the instruction: the policy types the
    same value into both boxes and no login is right once the password comes first; with them
    it types what follows the focused field's name."""
    without, with_labels = _typing_accuracy(False), _typing_accuracy(True)
    assert with_labels >= 0.875, with_labels
    assert without <= 0.25, without
