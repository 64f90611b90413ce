import json
import random
from collections.abc import Iterable

import pytest
import torch

from devicerl.actions import Action, ActionType
from devicerl.agents import require_trainable
from devicerl.agents.scripted import SyntheticOracle
from devicerl.agents.small import UNREPRESENTABLE_LOG_PROB, SmallAgent
from devicerl.agents.small.columns import ElemColumns, InstrColumns
from devicerl.agents.small.config import FeatureConfig
from devicerl.agents.small.encoder import SmallEncoder
from devicerl.agents.small.featurize import featurize
from devicerl.envs import make
from devicerl.errors import DataError
from devicerl.records import Observation, UIElement
from devicerl.runtime.acting.rollout import rollout


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """One intra-op thread: on a shared 2-core machine, two spinning OpenMP threads per process
    slow these small models down by an order of magnitude."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _obs(kind: str, n: int, render: bool = False) -> list[Observation]:
    env = make(f"synthetic/{kind}", n_boxes=4, render=render)
    return [env.reset(seed=s) for s in range(n)]


def _page() -> Observation:
    """Nested elements (a form containing a button), a repeated word, an input."""
    return Observation(
        instruction='Enter "blue sky" then press Submit; blue is nice',
        screen_size=(200, 100),
        elements=[
            UIElement("form", "form", "", bbox=(0, 0, 200, 100)),
            UIElement("in", "textbox", "", bbox=(10, 10, 110, 30), editable=True, clickable=True),
            UIElement("btn", "button", "Submit", bbox=(120, 40, 190, 60), clickable=True),
            UIElement("btn2", "button", "Cancel", bbox=(120, 70, 190, 90), clickable=True),
        ],
    )


def test_featurize_shapes_masks_and_overlap_features() -> None:
    obs = [*_obs("tap", 2), _page(), Observation("", (100, 100))]
    batch = featurize(obs)
    assert batch.instr_mask.shape[0] == 4 and batch.elem_mask.shape == (4, 4)
    assert batch.elem_mask.sum(1).tolist() == [4, 4, 4, 0]
    assert batch.instr_mask[3].sum() == 0
    # "Submit" occurs in the instruction, "Cancel" does not (feature 15: text in instruction)
    assert batch.elem_feats[2, 2, 15] == 1.0 and batch.elem_feats[2, 3, 15] == 0.0
    meta = batch.meta[2]
    assert [meta.instruction[a:b] for a, b in meta.token_spans][:4] == ["Enter", '"', "blue", "sky"]
    # the instruction names an element's kind: its role, or a prefix of it ("text" -> textbox)
    els = [UIElement("t", "textbox", "", bbox=(0, 0, 50, 20)), UIElement("b", "button", "Go")]
    named = [Observation(i, (100, 100), elements=els) for i in ("Type in the text field", "Go")]
    cols = ElemColumns.of(FeatureConfig())
    assert cols.role_mention == 20 and cols.history == slice(21, 23)  # after the base features
    assert batch.elem_feats.shape[-1] == cols.width == 23
    col = featurize(named).elem_feats[:, :2, cols.role_mention]
    assert col.tolist() == [[1.0, 0.0], [0.0, 0.0]]


@pytest.mark.parametrize("positions", ["absolute", "relative", "shifted"])
def test_act_log_prob_consistency_and_gradients(positions) -> None:
    agent = SmallAgent(temperature=1.3, features=FeatureConfig(instr_positions=positions))
    obs = _obs("tap", 6) + _obs("type", 6) + [_page()] * 4
    samples = agent.act(obs)
    assert len(samples) == len(obs)
    agent.train()
    lp = agent.log_prob(obs, [s.action for s in samples])
    reported = torch.tensor([s.log_prob for s in samples])
    assert torch.allclose(lp.detach(), reported, atol=1e-4)
    assert all(torch.isfinite(lp))
    lp.sum().backward()
    grads = {n: p.grad for n, p in agent.module.named_parameters()}
    assert grads["encoder.pieces.weight"].abs().sum() > 0
    assert grads["type_head.2.weight"].abs().sum() > 0
    assert all(g is None or torch.isfinite(g).all() for g in grads.values())


def test_greedy_is_deterministic_and_types_are_exact_substrings() -> None:
    agent = SmallAgent(seed=3, allowed_types=("TYPE",))
    page = _page()
    a = agent.act([page] * 3, greedy=True)
    b = agent.act([page] * 3, greedy=True)
    assert [s.action for s in a] == [s.action for s in b]
    for s in agent.act([page] * 20):
        assert s.action.type is ActionType.TYPE and s.action.text in page.instruction


def test_log_prob_maps_arbitrary_actions() -> None:
    agent = SmallAgent()
    page = _page()
    meta = featurize([page]).meta[0]

    def path(action: Action):  # the one path an action of the agent's first heads takes
        targets = agent.targets(meta, action)
        assert not targets.summed and len(targets.paths) == 1
        return targets, targets.paths[0][1]

    # tap at the button's centre: exact; inside the form only: smallest containing element
    exact, tap = path(Action.tap(155 / 200, 50 / 100))
    assert exact.exact and tap.elements == [2]
    inside, tap = path(Action.tap(0.05, 0.9))
    assert not inside.exact and tap.elements == [0] and inside.note == "smallest element"
    # a word that occurs twice is summed over both spans; a phrase maps to its span
    blue, span = path(Action.type_text("blue"))
    assert blue.exact and len(span.spans) == 2
    phrase, span = path(Action.type_text("blue sky"))
    assert phrase.exact and span.spans == [(2, 3)]
    loose, span = path(Action.type_text("  BLUE SKY "))
    assert not loose.exact and span.spans == [(2, 3)]
    assert path(Action.type_text("zebra"))[1].spans == []
    swipe, up = path(Action.swipe(0.2, 0.9, 0.25, 0.1))
    assert up.option == "up" and not swipe.exact  # not the agent's own geometry
    actions = [
        Action.tap(0.05, 0.9),
        Action.type_text("zebra"),
        Action.invalid("junk", "bad"),
        Action.enter(),
        Action.swipe(0.2, 0.9, 0.25, 0.1),
    ]
    lp = agent.log_prob([page] * len(actions), actions)
    assert torch.isfinite(lp).all()
    assert lp[2].item() == UNREPRESENTABLE_LOG_PROB
    assert lp[1].item() < UNREPRESENTABLE_LOG_PROB  # type part + floor for the missing span
    empty = Observation("", (100, 100))
    lp = agent.log_prob([empty], [Action.tap(0.5, 0.5)])
    assert torch.isfinite(lp).all()


def test_save_load_weights_and_versions(tmp_path) -> None:
    agent = SmallAgent(d_model=64, n_layers=1, features=FeatureConfig(buckets=1024))
    obs = _obs("type", 4)
    agent.version = 7
    agent.save(tmp_path / "a")
    loaded = SmallAgent.from_pretrained(tmp_path / "a")
    assert loaded.version == 7 and loaded.config == agent.config
    acts = [Action.tap(0.5, 0.5)] * 4
    assert torch.allclose(agent.log_prob(obs, acts), loaded.log_prob(obs, acts))
    other = SmallAgent(d_model=64, n_layers=1, features=FeatureConfig(buckets=1024), seed=9)
    assert not torch.allclose(other.log_prob(obs, acts), agent.log_prob(obs, acts))
    other.set_weights(agent.get_weights(), version=12)
    assert other.version == 12
    assert torch.allclose(other.log_prob(obs, acts), agent.log_prob(obs, acts))
    with pytest.raises(DataError, match="missing"):
        other.set_weights({})
    with pytest.raises(DataError, match="fit this agent"):
        SmallAgent().load(tmp_path / "a")
    (tmp_path / "bad").mkdir()
    with pytest.raises(DataError, match=r"small_agent\.json"):
        SmallAgent.from_pretrained(tmp_path / "bad")
    assert require_trainable(agent) is agent
    # agents saved before the history and role features existed load with them off
    off = FeatureConfig(buckets=1024, history=False, role_mention=False)
    SmallAgent(d_model=64, n_layers=1, features=off).save(tmp_path / "old")
    meta = json.loads((tmp_path / "old" / "small_agent.json").read_text())
    del meta["config"]["features"]["history"], meta["config"]["features"]["role_mention"]
    (tmp_path / "old" / "small_agent.json").write_text(json.dumps(meta))
    assert SmallAgent.from_pretrained(tmp_path / "old").config.features == off


def test_screenshot_variant_and_encoder_reuse() -> None:
    agent = SmallAgent(d_model=64, features=FeatureConfig(screenshot_size=(32, 64)))
    obs = _obs("tap", 3, render=True)
    samples = agent.act(obs)
    lp = agent.log_prob(obs, [s.action for s in samples])
    assert torch.allclose(lp, torch.tensor([s.log_prob for s in samples]), atol=1e-4)
    # a critic reuses the encoder on the same features
    enc = SmallEncoder(agent.config)
    out = enc(agent.featurize(obs))
    assert out.global_state.shape == (3, 64) and out.elems.shape[:2] == (3, 4)


def _demos(kind: str, seeds: range) -> list[tuple[Observation, Action]]:
    env = make(f"synthetic/{kind}", n_boxes=4, render=False)
    data = []
    for s in seeds:
        traj = rollout(env, SyntheticOracle(), f"synthetic/{kind}", s)
        assert traj.success
        data += [(st.observation, st.action) for st in traj.steps]
    return data


def _success(agent: SmallAgent, kind: str, seeds: range) -> float:
    env = make(f"synthetic/{kind}", n_boxes=4, render=False)
    task = f"synthetic/{kind}"
    return sum(rollout(env, agent, task, s, greedy=True).success for s in seeds) / len(seeds)


def _imitate(
    agent: SmallAgent, batches: Iterable[list[tuple[Observation, Action]]], lr: float
) -> None:
    """Behaviour cloning: one Adam step on the mean NLL of each batch, then eval mode."""
    opt = torch.optim.Adam(agent.parameters(), lr=lr)
    agent.train()
    for batch in batches:
        loss = -agent.log_prob([o for o, _ in batch], [a for _, a in batch]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    agent.eval()


@pytest.mark.slow
@pytest.mark.parametrize("positions", ["absolute", "relative", "shifted"])
def test_behaviour_cloning_learns_tap_and_type_in_seconds(positions) -> None:
    """The architecture is learnable: BC on oracle demos solves held-out episodes."""
    torch.manual_seed(0)
    data = _demos("tap", range(150)) + _demos("type", range(150))
    agent = SmallAgent(d_model=96, seed=1, features=FeatureConfig(instr_positions=positions))
    before = _success(agent, "tap", range(10_000, 10_030))
    rng = random.Random(0)
    _imitate(agent, (rng.sample(data, 32) for _ in range(200)), lr=2e-3)
    tap = _success(agent, "tap", range(10_000, 10_040))
    typ = _success(agent, "type", range(10_000, 10_040))
    assert before < 0.5
    # type episodes whose typed word is also another box's label stay hard for a while
    assert tap >= 0.95 and typ >= 0.85, (tap, typ)


def test_exploration_floor_mixes_a_uniform_choice_over_allowed_options() -> None:
    from devicerl.agents.small.heads.base import MASKED, with_floor

    logits = torch.tensor([[8.0, 0.0, MASKED, -2.0], [0.0, MASKED, MASKED, MASKED]])
    log_p = torch.log_softmax(logits, -1)
    mixed = with_floor(log_p, logits, 0.1).exp()
    assert torch.allclose(mixed.sum(-1), torch.ones(2))
    assert mixed[0, 2] < 1e-6 and mixed[1, 1:].sum() < 1e-6  # masked options stay impossible
    assert mixed[0, 1] >= 0.1 / 3 and mixed[0, 3] >= 0.1 / 3  # each allowed one >= eps / K
    assert torch.equal(mixed.argmax(-1), log_p.argmax(-1))  # greedy actions unchanged
    assert torch.equal(with_floor(log_p, logits, 0.0), log_p)


def test_a_collector_can_raise_the_exploration_floor_per_observation() -> None:
    from devicerl.agents.small.agent import MAX_EPSILON
    from devicerl.agents.small.heads.tap import Tap

    agent = SmallAgent(
        d_model=32, n_layers=1, epsilon=0.0, seed=3, allowed_types=("DUAL_POINT",), heads=()
    )
    page = _page()
    n_elems = len(page.elements)
    element = agent.forward(agent.featurize([page, page]), agent._epsilons([0.0, 0.9])).of(Tap)
    p_elem = element.exp()
    assert torch.allclose(p_elem.sum(-1), torch.ones(2), atol=1e-5)
    assert (p_elem[1] >= 0.9 / n_elems - 1e-6).all()  # the asked floor, on that row only
    plain = agent.forward(agent.featurize([page])).of(Tap)
    assert torch.allclose(element[0], plain[0])  # other rows keep the config's floor
    assert agent._epsilons(None) == 0.0  # nobody asked: one level, no tensor
    levels = agent._epsilons([5.0, 0.0])
    assert MAX_EPSILON == 0.95
    assert torch.allclose(levels, torch.tensor([[0.95], [0.0]]))  # capped at MAX_EPSILON
    floored = SmallAgent(d_model=32, n_layers=1, epsilon=0.2, seed=3)
    assert torch.allclose(floored._epsilons([0.1, 0.5]), torch.tensor([[0.2], [0.5]]))
    # sampling with the raised floor spreads the taps over the page's elements
    samples = agent.act([page] * 100, epsilon=[0.9] * 100)
    assert {s.extras["element"] for s in samples} == {e.id for e in page.elements}
    # log-probs at the same level agree with acting; without it they do not
    actions = [s.action for s in samples]
    again = agent.log_prob([page] * 100, actions, epsilon=[0.9] * 100)
    assert torch.allclose(again, torch.tensor([s.log_prob for s in samples]), atol=1e-4)
    assert not torch.allclose(agent.log_prob([page] * 100, actions), again, atol=1e-2)


def test_history_features_read_the_episodes_earlier_actions() -> None:
    from devicerl.actions import AITW_TYPES
    from devicerl.agents.small.columns import HistoryColumns
    from devicerl.agents.small.featurize import Featurizer
    from devicerl.records import with_previous_actions

    cfg = FeatureConfig(history=True, role_mention=False)
    ic, ec, hc = InstrColumns.of(cfg), ElemColumns.of(cfg), HistoryColumns.of(AITW_TYPES)
    assert ic.history == slice(7, 9) and ec.history == slice(20, 22) and hc.no_action == 7
    page = _page()
    tap_box = Action.tap(0.3, 0.2)  # the text box's centre
    typed = with_previous_actions(page, [tap_box, Action.type_text("blue sky"), tap_box])
    fresh, seen = featurize([page, typed], cfg), featurize([typed], cfg)
    assert fresh.history is not None and seen.history is not None
    assert fresh.instr_feats.shape[-1] == ic.width and fresh.elem_feats.shape[-1] == ec.width
    assert torch.equal(fresh.elem_feats[1], seen.elem_feats[0])
    # no earlier action: nothing marked, the "no action yet" flag set
    assert fresh.instr_feats[0, :, ic.history].abs().sum() == 0
    assert fresh.elem_feats[0, :, ec.history].abs().sum() == 0
    assert fresh.history[0, hc.no_action] == 1.0
    # the box was tapped twice (last action included), the form around it not
    box = fresh.elem_feats[1, 1, ec.history].tolist()
    assert box == pytest.approx([1.0, 2 / 3]) and fresh.elem_feats[1, 0, ec.history].sum() == 0
    # "blue sky" was typed earlier (not by the last action): only the tokens of that phrase are
    # marked, not the later lone "blue"
    words = [page.instruction[a:b] for a, b in fresh.meta[1].token_spans]
    earlier = fresh.instr_feats[1, : len(words), ic.history.start + 1]
    assert [w for w, f in zip(words, earlier) if f] == ["blue", "sky"]
    assert fresh.instr_feats[1, :, ic.history.start].sum() == 0
    g = fresh.history[1].tolist()
    assert g[hc.last_type][AITW_TYPES.index(ActionType.DUAL_POINT)] == 1.0
    assert g[hc.no_action] == 0.0
    assert g[hc.count] == pytest.approx(0.3)  # three actions so far
    assert g[hc.typed] == pytest.approx(1 / 3)  # one TYPE
    # the last-action columns are the type head's classes; another type (one the head lacks,
    # an invalid action) sets none of them, and is no "no action" either
    two = (ActionType.DUAL_POINT, ActionType.TYPE)
    for last in (Action.enter(), Action.invalid("junk", "unparsable")):
        other = Featurizer(cfg, types=two)([with_previous_actions(page, [tap_box, last])])
        assert other.history is not None and other.history.shape == (1, 2 + 5)
        row = other.history[0].tolist()
        assert row[:2] == [0.0, 0.0] and row[HistoryColumns.of(two).no_action] == 0.0


def test_history_agent_sees_the_same_input_when_acting_and_learning() -> None:
    agent = SmallAgent(d_model=64, features=FeatureConfig(history=True), seed=3)
    assert agent.uses_history
    assert not SmallAgent(d_model=64, features=FeatureConfig(history=False)).uses_history
    env = make("synthetic/type", n_boxes=4, render=False)
    traj = rollout(env, agent, "synthetic/type", 5)
    assert traj.length >= 2
    obs = [traj.agent_observation(i) for i in range(traj.length)]
    assert obs[0].previous_actions == () and len(obs[-1].previous_actions) == traj.length - 1
    assert all(s.observation.previous_actions == () for s in traj.steps)  # stored as observed
    assert traj.agent_observation(1) is obs[1]  # kept with the trajectory
    lp = agent.log_prob(obs, [s.action for s in traj.steps])
    assert torch.allclose(lp, torch.tensor([s.log_prob for s in traj.steps]), atol=1e-4)
    # the history changes the policy's input: without it the log-probs differ
    bare = agent.log_prob(
        [s.observation for s in traj.steps[1:]], [s.action for s in traj.steps[1:]]
    )
    assert not torch.allclose(bare, lp[1:], atol=1e-4)


@pytest.mark.parametrize("point_actions", [False, True])
def test_uniform_baseline_draws_every_gesture_the_agent_can_express(point_actions) -> None:
    from devicerl.agents.small.config import SmallAgentConfig
    from devicerl.agents.small.uniform import UniformPolicy

    cfg = SmallAgentConfig(heads=("swipes", "points") if point_actions else ("swipes",))
    policy = UniformPolicy(cfg, seed=0)
    actions = [a.action for _ in range(100) for a in policy.act([_page()])]
    taps = [a for a in actions if a.type is ActionType.DUAL_POINT and a.touch == a.lift]
    swipes = [a for a in actions if a.type is ActionType.DUAL_POINT and a.touch != a.lift]
    from devicerl.agents.small.heads.swipes import swipe_action

    fixed = {swipe_action(d) for d in ("up", "down", "left", "right")}
    assert taps and swipes and any(a.type is ActionType.TYPE for a in actions)
    free = [a for a in swipes if a not in fixed]  # drags from anywhere to anywhere
    assert bool(free) == point_actions


_NAMES = ["Kasie", "Gq6Ds", "tlZmG", "yDtg", "Joye", "Cheree", "Lyda", "bernardine"]
_HELD_OUT = ["AZE", "renda", "EbV4", "sergio", "B5sU", "jess", "Szev7", "cristin"]


def _form(instruction: str) -> Observation:
    box = UIElement("in", "textbox", "", bbox=(10, 10, 110, 30), editable=True, focused=True)
    return Observation(instruction, (160, 210), elements=[box, UIElement("b", "button", "Submit")])


def _typed_after_imitating_one_template(positions: str) -> dict[str, float]:
    """Imitate typing the quoted name of `Enter "X" into the text field ...` (the enter-text
    template: the name is always the third token), then type greedily on held-out names in
    that template and in two others that put the quoted name elsewhere."""
    torch.manual_seed(0)
    rng = random.Random(0)
    agent = SmallAgent(
        d_model=64, seed=1, allowed_types=("TYPE",),
        features=FeatureConfig(instr_positions=positions),
    )  # fmt: skip
    seen = 'Enter "{}" into the text field and press Submit.'
    batches = ([rng.choice(_NAMES) for _ in range(16)] for _ in range(60))
    _imitate(
        agent,
        ([(_form(seen.format(n)), Action.type_text(n)) for n in names] for names in batches),
        lr=3e-3,
    )
    templates = {
        "seen": seen,
        "login": 'Enter the username "{}" into the text field and press login.',
        "other": 'Please type the word "{}" in the box, then press Submit.',
    }
    out = {}
    for name, template in templates.items():
        acts = agent.act([_form(template.format(n)) for n in _HELD_OUT], greedy=True)
        out[name] = sum(s.action.text == n for s, n in zip(acts, _HELD_OUT)) / len(_HELD_OUT)
    return out


def test_relative_positions_type_the_quoted_phrase_in_a_template_never_seen() -> None:
    """With token indices the span pointer learns "the third token" from one template (in the
    login-user sentence that is "username"); with relative positions it learns the quoted
    phrase and types it wherever a new template puts it; with shifted indices (the name moves
    the offset) "the third token" is no fixed input either, and it mostly types the name."""
    absolute = _typed_after_imitating_one_template("absolute")
    relative = _typed_after_imitating_one_template("relative")
    shifted = _typed_after_imitating_one_template("shifted")
    assert absolute["seen"] == relative["seen"] == shifted["seen"] == 1.0
    assert absolute["login"] == 0.0 and absolute["other"] == 0.0, absolute
    assert relative["login"] == 1.0 and relative["other"] == 1.0, relative
    assert shifted["login"] == 1.0 and shifted["other"] >= 0.5, shifted
