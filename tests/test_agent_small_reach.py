"""The small agent's optional action paths (taps at any point, drags, page-text spans, free
text) and pixel features: exact log-probs for every path, persistence, learnability."""

import dataclasses
import json
import math
import random

import numpy as np
import pytest
import torch

from devicerl.actions import Action, ActionType
from devicerl.agents.capabilities import ActionKind
from devicerl.agents.small import UNREPRESENTABLE_LOG_PROB, SmallAgent
from devicerl.agents.small.columns import ElemColumns
from devicerl.agents.small.config import FeatureConfig
from devicerl.agents.small.featurize import featurize
from devicerl.agents.small.heads.base import QUIET_LOGIT
from devicerl.agents.small.heads.points import Points
from devicerl.agents.small.heads.tap import Tap
from devicerl.envs import make
from devicerl.errors import DataError
from devicerl.records import Observation, UIElement

pytestmark = pytest.mark.usefixtures("one_torch_thread")


ALL_HEADS = ("swipes", "points", "page_text", "free_text")


def _reach(**kw) -> SmallAgent:
    features = kw.pop("features", FeatureConfig(pixels=True, pixel_size=(48, 64), dom_flags=False))
    return SmallAgent(
        d_model=48,
        n_layers=1,
        heads=kw.pop("heads", ALL_HEADS),
        grid=(4, 4),
        offsets=3,
        features=features,
        **kw,
    )


def _page() -> Observation:
    """A grid-aligned element (its box is cell 0 of a 4 x 4 grid), a button, a text box."""
    return Observation(
        instruction='Enter "blue sky" then press Submit',
        screen_size=(200, 100),
        screenshot=np.full((100, 200, 3), 200, np.uint8),
        elements=[
            UIElement("cell", "text", "Total: 42 apples", bbox=(0, 0, 50, 25)),
            UIElement("in", "textbox", "", bbox=(60, 40, 110, 60), editable=True, clickable=True),
            UIElement("btn", "button", "Submit now", bbox=(120, 40, 190, 60), clickable=True),
        ],
    )


def _observations() -> list[Observation]:
    env = make("synthetic/type", n_boxes=4)
    return [env.reset(seed=s) for s in range(5)] + [_page()] * 3


def test_every_path_is_sampled_and_scores_the_same_when_recomputed() -> None:
    obs = _observations() * 6
    seen: set = set()
    for types in (("DUAL_POINT",), ("TYPE",), None):
        agent = _reach(allowed_types=types, epsilon=0.5, temperature=1.2, seed=1)
        samples = agent.act(obs)
        seen |= {
            (s.extras["type"], s.extras.get("gesture"), s.extras.get("source")) for s in samples
        }
        agent.train()
        lp = agent.log_prob(obs, [s.action for s in samples])
        assert torch.allclose(lp.detach(), torch.tensor([s.log_prob for s in samples]), atol=1e-4)
        assert torch.isfinite(lp).all()
        lp.sum().backward()
        grads = {n: p.grad for n, p in agent.module.named_parameters() if p.grad is not None}
        assert all(torch.isfinite(g).all() for g in grads.values())
        if types == ("DUAL_POINT",):
            assert grads["points.lift.key.weight"].abs().sum() > 0
            assert grads["encoder.cnn.net.0.weight"].abs().sum() > 0
        if types == ("TYPE",):
            assert grads["chars.cell.weight_hh"].abs().sum() > 0
            assert grads["page.start_key.weight"].abs().sum() > 0
    gestures = {g for t, g, _ in seen if t == "DUAL_POINT"}
    assert gestures == {"tap", "up", "down", "left", "right", "point", "drag"}
    assert {s for t, _, s in seen if t == "TYPE"} == {"instruction", "page", "free"}
    assert {t for t, _, _ in seen} >= {"PRESS_ENTER", "PRESS_BACK", "STATUS_TASK_COMPLETE"}
    # the entropy bonus also covers the gesture, the touch point and the text source
    agent = _reach(seed=2, epsilon=0.0)
    ent = agent.entropy(obs[:8])
    basic = SmallAgent(d_model=48, n_layers=1, epsilon=0.0).entropy(obs[:8])
    assert torch.isfinite(ent).all() and (ent > basic + 1.0).all()
    # greedy decoding is deterministic on every path
    assert [s.action for s in agent.act(obs[:8], greedy=True)] == [
        s.action for s in agent.act(obs[:8], greedy=True)
    ]


def _points(agent: SmallAgent) -> Points:
    return next(h for h in agent.parts.heads if isinstance(h, Points))


def test_an_action_sums_over_every_path_that_gives_it() -> None:
    agent = _reach(seed=3)
    page = _page()
    batch = agent.featurize([page])
    meta = batch.meta[0]
    fwd = agent.forward(batch)
    points = _points(agent)

    def paths(action: Action):
        targets = agent.targets(meta, action)
        return targets, {p.option: p for _, p in targets.paths}

    # the element's centre is also the centre offset of its own box and of grid cell 0
    centre = Action.tap(25 / 200, 12.5 / 100)
    tg, by = paths(centre)
    assert tg.exact and tg.summed and set(by) == {"tap", "point", "drag"}  # no swipe
    assert by["tap"].elements == [0]
    cell, elem = 0, 16  # anchors: 16 grid cells, then the elements
    assert sorted(by["point"].touch) == [(cell, 4), (elem, 4)]
    assert sorted(by["drag"].touch) == sorted(by["drag"].lift) == [(cell, 4), (elem, 4)]
    pts = points.anchor_points(meta)
    assert np.allclose(pts[cell, 4], pts[elem, 4]) and np.allclose(pts[cell, 4], centre.touch)
    # by hand: tap on the element + a point tap via either anchor + a drag that does not move
    lift = points.lift(fwd.x, [0], torch.tensor([centre.touch]))[0]
    lift = torch.logaddexp(lift[cell, 4], lift[elem, 4])
    touch = fwd.of(Points)
    point = torch.logaddexp(touch[0, cell, 4], touch[0, elem, 4])
    gesture = fwd.routers[ActionType.DUAL_POINT].log_p[0]
    assert agent.parts.routers[ActionType.DUAL_POINT].index(points, "drag") == 6
    by_hand = fwd.types[0, 0] + torch.stack(
        [gesture[0] + fwd.of(Tap)[0, 0], gesture[5] + point, gesture[6] + point + lift]
    ).logsumexp(0)
    got = agent.log_prob([page], [centre])[0]
    assert torch.allclose(got, by_hand, atol=1e-5)
    # typed text: every source that writes it exactly
    _, both = paths(Action.type_text("blue sky"))
    assert set(both) == {"instruction", "free"} and both["free"].text == "blue sky"
    _, page_text = paths(Action.type_text("42 apples"))
    assert set(page_text) == {"page", "free"} and page_text["page"].spans == [(0, 2, 3)]
    upper, by = paths(Action.type_text("BLUE SKY"))
    assert upper.exact and set(by) == {"free"}
    # what no path writes: a character outside the vocabulary that the instruction lacks
    odd, by = paths(Action.type_text("ünïcode"))
    assert not odd.exact and "free" not in by
    # another agent's tap between our points: the nearest point, flagged
    near, by = paths(Action.tap(0.301, 0.777))
    assert not near.exact and near.note == "nearest point" and len(by["point"].touch) == 1
    foreign = [Action.type_text("ünïcode"), Action.tap(0.301, 0.777), Action.swipe(0, 0, 1, 0.9)]
    lps = agent.log_prob([page] * 3, foreign)
    assert torch.isfinite(lps).all()
    assert lps[0] < UNREPRESENTABLE_LOG_PROB + 1  # the type part plus the floor


def test_save_load_round_trip_and_agents_saved_before_the_new_paths(tmp_path) -> None:
    agent = _reach(seed=4)
    obs = [_page()] * 4
    actions = [
        Action.swipe(0.125, 0.125, 0.875, 0.875),
        Action.type_text("BLUE SKY"),
        Action.type_text("42 apples"),
        Action.tap(25 / 200, 12.5 / 100),
    ]
    agent.save(tmp_path / "reach")
    loaded = SmallAgent.from_pretrained(tmp_path / "reach")
    assert loaded.config == agent.config
    assert torch.allclose(loaded.log_prob(obs, actions), agent.log_prob(obs, actions))
    # an agent saved in format 1 before these options existed: no format_version, no list of
    # heads (fixed swipes on when unset), none of their keys
    old = SmallAgent(d_model=32, n_layers=1, features=FeatureConfig(buckets=512))
    old.save(tmp_path / "old")
    meta = json.loads((tmp_path / "old" / "small_agent.json").read_text())
    assert meta["format_version"] == 2 and meta["config"]["heads"] == ["swipes"]
    del meta["format_version"]
    for key in ("heads", "type_classes", "grid", "offsets", "max_chars"):
        del meta["config"][key]
    for key in ("dom_flags", "pixels", "pixel_size", "elem_words"):
        del meta["config"]["features"][key]
    (tmp_path / "old" / "small_agent.json").write_text(json.dumps(meta))
    back = SmallAgent.from_pretrained(tmp_path / "old")
    assert back.config == old.config and back.config.heads == ("swipes",)
    assert torch.allclose(back.log_prob(obs, actions), old.log_prob(obs, actions))
    # weights of another architecture: one clear line
    wider = SmallAgent(d_model=32, n_layers=1, heads=ALL_HEADS[:2], features=old.config.features)
    with pytest.raises(DataError, match="fit this agent") as err:
        wider.load(tmp_path / "old")
    assert "\n" not in str(err.value)


def test_action_kinds_say_what_the_options_add() -> None:
    default = SmallAgent(d_model=32, n_layers=1).action_kinds
    new = {ActionKind.POINT, ActionKind.DRAG, ActionKind.TYPE_PAGE, ActionKind.TYPE_COMPUTED}
    assert not default & (new | {ActionKind.PIXELS})
    assert _reach().action_kinds >= new | {ActionKind.PIXELS, ActionKind.SCROLL}
    page_only = SmallAgent(d_model=32, n_layers=1, heads=("swipes", "page_text")).action_kinds
    assert ActionKind.TYPE_PAGE in page_only and ActionKind.TYPE_COMPUTED not in page_only
    taps = _reach(allowed_types=("DUAL_POINT",), heads=ALL_HEADS[1:]).action_kinds
    assert taps == {ActionKind.TAP, ActionKind.SELECT, ActionKind.POINT, ActionKind.DRAG,
                    ActionKind.SCROLL, ActionKind.PIXELS}  # fmt: skip


def test_dom_flags_off_and_pixel_features() -> None:
    page = _page()
    on, off = featurize([page]), featurize([page], FeatureConfig(dom_flags=False))
    flags = ElemColumns.of(FeatureConfig()).dom_flags
    assert on.elem_feats[0, :3, flags].sum() > 0
    assert off.elem_feats[0, :, flags].abs().sum() == 0
    cfg = FeatureConfig(pixels=True, pixel_size=(48, 64))
    batch = featurize([page], cfg)
    assert batch.pixels.shape == (1, 3, 64, 48) and batch.elem_pool.shape == (1, 3, 16 * 12)
    assert torch.allclose(batch.elem_pool.sum(-1), torch.ones(1, 3))
    # the same page in another colour: element and cell states differ only with pixels on
    red = dataclasses.replace(page, screenshot=np.full((100, 200, 3), (220, 20, 20), np.uint8))
    for pixels, differ in ((True, True), (False, False)):
        agent = _reach(features=FeatureConfig(pixels=pixels, pixel_size=(48, 64)), seed=5)
        enc = agent.module.encoder(agent.featurize([page, red]))
        assert (not torch.allclose(enc.elems[0], enc.elems[1], atol=1e-5)) is differ
        assert (not torch.allclose(enc.cells[0], enc.cells[1], atol=1e-5)) is differ
    with pytest.raises(ValueError, match="multiples of 4"):
        FeatureConfig(pixel_size=(30, 64))


_COLOURS = {"red": (220, 30, 30), "blue": (30, 60, 220)}


def _squares(seed: int) -> tuple[Observation, dict[str, tuple[int, int, int, int]], str, str]:
    """A 160 x 160 screen with a red and a blue square and no UI element at all: only the
    pixels say where they are, only the instruction says which is which."""
    rng = np.random.default_rng(seed)
    img = np.full((160, 160, 3), 245, np.uint8)
    boxes = {}
    for name, c in zip(_COLOURS, rng.choice(16, 2, replace=False)):
        x = int(c % 4) * 40 + int(rng.integers(0, 10))
        y = int(c // 4) * 40 + int(rng.integers(0, 10))
        img[y : y + 30, x : x + 30] = _COLOURS[name]
        boxes[name] = (x, y, x + 30, y + 30)
    src, dst = ("red", "blue") if seed % 2 else ("blue", "red")
    obs = Observation(f"Drag the {src} square onto the {dst} square", (160, 160), screenshot=img)
    return obs, boxes, src, dst


def test_a_drag_between_coloured_squares_is_learnt_from_pixels() -> None:
    """Behaviour cloning on drags (touch one square, lift on the other): learnable only through
    the pixel features, the touch pointers and the lift pointers together."""
    agent = SmallAgent(
        d_model=48, n_layers=1, d_ff=96, heads=("points",), grid=(4, 4),
        offsets=3, allowed_types=("DUAL_POINT",), epsilon=0.0,
        features=FeatureConfig(pixels=True, pixel_size=(32, 32), history=False),
    )  # fmt: skip
    agent.featurizer.enable_cache()  # as learners do: each screenshot is downscaled once

    def nearest(obs: Observation, box) -> tuple[float, float]:
        pts = _points(agent).anchor_points(agent.featurize([obs]).meta[0]).reshape(-1, 2) * 160
        d = (pts[:, 0] - (box[0] + box[2]) / 2) ** 2 + (pts[:, 1] - (box[1] + box[3]) / 2) ** 2
        return tuple(float(v) / 160 for v in pts[int(d.argmin())])

    def inside(p, box) -> bool:
        return box[0] <= p[0] * 160 <= box[2] and box[1] <= p[1] * 160 <= box[3]

    def success() -> float:
        episodes = [_squares(s) for s in range(10_000, 10_040)]
        acts = agent.act([e[0] for e in episodes], greedy=True)
        return sum(
            inside(a.action.touch, boxes[s]) and inside(a.action.lift, boxes[d])
            for (_, boxes, s, d), a in zip(episodes, acts)
        ) / len(episodes)

    data = []
    for seed in range(300):
        obs, boxes, src, dst = _squares(seed)
        data.append((obs, Action.swipe(*nearest(obs, boxes[src]), *nearest(obs, boxes[dst]))))
    before = success()
    opt = torch.optim.Adam(agent.parameters(), lr=3e-3)
    rng = random.Random(0)
    agent.train()
    for _ in range(150):
        batch = rng.sample(data, 16)
        loss = -agent.log_prob([o for o, _ in batch], [a for _, a in batch]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    agent.eval()
    after = success()
    assert before <= 0.1 and after >= 0.9, (before, after)
    assert all(a.action.type is ActionType.DUAL_POINT for a in agent.act([data[0][0]]))


def test_free_text_learns_a_case_change_the_instruction_does_not_contain() -> None:
    """Behaviour cloning on 'Type "word" in capitals': the upper-case word appears nowhere, so
    only the character decoder writes it, copying each letter's place and changing its case."""
    letters = "abcdefghijklmnopqrstuvwxyz"

    def episode(seed: int) -> tuple[Observation, str]:
        r = random.Random(seed)
        word = "".join(r.choice(letters) for _ in range(r.randint(3, 6)))
        return Observation(f'Type "{word}" in capitals', (100, 100)), word.upper()

    agent = SmallAgent(
        d_model=48, n_layers=1, d_ff=96, heads=("swipes", "free_text"), allowed_types=("TYPE",),
        epsilon=0.0,
        features=FeatureConfig(history=False),
    )  # fmt: skip
    agent.featurizer.enable_cache()

    def success() -> float:
        held_out = [episode(s) for s in range(10_000, 10_040)]
        acts = agent.act([o for o, _ in held_out], greedy=True)
        return sum(a.action.text == w for (_, w), a in zip(held_out, acts)) / len(held_out)

    data = [(o, Action.type_text(w)) for o, w in (episode(s) for s in range(400))]
    before = success()
    opt = torch.optim.Adam(agent.parameters(), lr=3e-3)
    rng = random.Random(0)
    agent.train()
    for _ in range(250):
        batch = rng.sample(data, 16)
        loss = -agent.log_prob([o for o, _ in batch], [a for _, a in batch]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    agent.eval()
    after = success()
    assert before == 0.0 and after >= 0.9, (before, after)
    assert {a.extras["source"] for a in agent.act([data[0][0]] * 4)} == {"free"}


def test_init_from_grows_a_saved_agent_with_the_parts_it_lacks(tmp_path) -> None:
    from devicerl.agents.factory import AgentSpec
    from devicerl.agents.small.config import SmallAgentOptions
    from devicerl.config import config_source, load_config
    from devicerl.errors import ConfigError
    from devicerl.runtime.setup.config import TrainConfig

    # the run options (``agent.small``) of a saved agent, and of one grown from it: the same
    # encoder, plus every reach head and pixels
    options = SmallAgentOptions(d_model=48)
    base = SmallAgent(options.architecture(seed=1))
    base.version = 7
    base.save(tmp_path / "base")
    reach = dataclasses.replace(
        options, heads=("swipes", "points", "page_text", "free_text"), inputs=("pixels",)
    )
    spec = AgentSpec(kind="small", seed=2, small=reach, init_from=str(tmp_path / "base"))
    grown = spec.make()
    fresh = SmallAgent(reach.architecture(seed=2))
    assert isinstance(grown, SmallAgent) and grown.version == 0
    assert grown.config == fresh.config
    saved, own = base.module.state_dict(), grown.module.state_dict()
    new = [k for k in own if k not in saved]
    assert any(k.startswith("encoder.cnn.") for k in new) and any("chars." in k for k in new)
    quieted = ("encoder.pixel_", "more_gestures.", "source_head.")
    for k, v in own.items():  # the saved weights, and the new parts as a fresh agent has them
        if not k.startswith(quieted):
            assert torch.equal(v, saved[k] if k in saved else fresh.module.state_dict()[k]), k
    assert not all(torch.equal(v, fresh.module.state_dict()[k]) for k, v in saved.items())
    # ... except that the new choices start low and the pixel projections at zero
    net = grown.module
    assert not net.encoder.pixel_elems.weight.any() and not net.encoder.pixel_cells.bias.any()
    tap = net.gesture_head.bias[0] + QUIET_LOGIT  # point and drag start below the element tap
    assert (net.more_gestures.weight == net.gesture_head.weight[0]).all()
    assert torch.allclose(net.more_gestures.bias, tap.expand(2))
    assert net.source_head.bias.tolist() == [0.0, QUIET_LOGIT, QUIET_LOGIT]
    obs = [_page()] * 2
    actions = [Action.type_text("BLUE SKY"), Action.tap(25 / 200, 12.5 / 100)]
    assert torch.isfinite(grown.log_prob(obs, actions)).all()
    # what cannot be grown from: one clear line naming the culprit
    grown.save(tmp_path / "grown")
    with pytest.raises(DataError, match=r"lacks .*chars\."):  # a part this config lacks
        SmallAgent(base.config).load_matching(tmp_path / "grown")
    with pytest.raises(DataError, match="architecture") as err:  # another width
        narrow = dataclasses.replace(base.config, d_model=32, d_ff=64)
        SmallAgent(narrow).load_matching(tmp_path / "base")
    assert "\n" not in str(err.value)
    with pytest.raises(DataError, match="saved agent directory"):
        SmallAgent(base.config).load_matching(tmp_path / "none")
    with pytest.raises(ConfigError, match="both set"):  # the pretrained setup names agent.path
        load_config(
            TrainConfig,
            config_source("miniwob-digirl-pretrained"),
            [f"agent.init_from={tmp_path / 'base'}"],
        )
    with pytest.raises(ConfigError, match="only the small agent"):
        AgentSpec(kind="random", init_from=str(tmp_path / "base")).validate()


def test_a_grown_agent_first_acts_as_the_saved_one(tmp_path) -> None:
    """Text sources and Enter added to a saved agent: its greedy actions stay the saved
    agent's, and an action's log-prob loses at most the new choices' share."""
    features = FeatureConfig(dom_flags=False, elem_words=4)
    base = SmallAgent(
        d_model=48,
        n_layers=1,
        features=features,
        seed=3,
        allowed_types=("DUAL_POINT", "TYPE"),
        epsilon=0.0,
    )  # no exploration floor: it spreads over every choice, the new ones too
    obs = _observations()
    for params in base.module.parameters():  # a trained agent's logits are far from zero
        params.data.mul_(4.0)
    config = dataclasses.replace(
        base.config,
        heads=(*base.config.heads, "page_text", "free_text"),
        allowed_types=("DUAL_POINT", "TYPE", "PRESS_ENTER"),
    )
    plain, grown = SmallAgent(config), SmallAgent(config)
    plain.module.load_state_dict(base.module.state_dict(), strict=False)  # without quieting
    base.save(tmp_path)
    grown.load_matching(tmp_path)
    with torch.no_grad():
        want = base.act(obs, greedy=True)
        actions = [s.action for s in want]
        assert [s.action for s in grown.act(obs, greedy=True)] == actions
        taps = [a.type is ActionType.DUAL_POINT for a in actions]
        gap = base.log_prob(obs, actions) - grown.log_prob(obs, actions)
        plain_gap = base.log_prob(obs, actions) - plain.log_prob(obs, actions)
    # Enter takes at most e^-4 of the odds of an action type; the two new text sources at most
    # 2 e^-4 of a typed span's
    enter, sources = (math.log(1 + k * math.exp(QUIET_LOGIT)) for k in (1, 2))
    assert gap.min() > -1e-5 and gap.max() < enter + sources + 1e-4
    assert all(g < enter + 1e-4 for g, t in zip(gap.tolist(), taps) if t) and any(taps)
    assert plain_gap.abs().max() > gap.abs().max()  # without quieting, the agent changes more


def test_gated_cells_leave_a_grown_agents_states_as_they_were(tmp_path) -> None:
    """Point actions and pixels add grid cells to the encoder. Shared, every token reads them and
    every state of a grown agent moves; gated, the others read them only through a readback
    that starts closed, so the saved agent's states and greedy actions stay, and training opens
    the readback."""
    features = FeatureConfig(dom_flags=False, pixel_size=(48, 64))
    base = SmallAgent(d_model=48, n_layers=2, features=features, seed=3, epsilon=0.0)
    for params in base.module.parameters():  # a trained agent's attention is far from uniform
        params.data.mul_(3.0)
    base.save(tmp_path)
    obs = _observations()
    grow = {"heads": ("swipes", "points"), "grid": (4, 4), "offsets": 3}
    grow["features"] = dataclasses.replace(features, pixels=True)
    agents = {}
    for mode in ("shared", "gated"):
        agents[mode] = SmallAgent(dataclasses.replace(base.config, cell_attention=mode, **grow))
        fresh = agents[mode].load_matching(tmp_path)
        assert ("encoder.cell_readback.out_proj.weight" in fresh) is (mode == "gated")
    batch = base.featurize(obs)
    with torch.no_grad():
        want = base.module.encoder(batch)
        for mode, agent in agents.items():
            got = agent.module.encoder(agent.featurize(obs))
            moved = max(
                (got[i] - want[i]).abs().max().item() for i in range(3)
            )  # global, instruction and element states
            assert (moved < 1e-5) is (mode == "gated"), (mode, moved)
        actions = [s.action for s in base.act(obs, greedy=True)]
        assert [s.action for s in agents["gated"].act(obs, greedy=True)] == actions
    # the gate opens: a point tap's loss reaches the readback, then the element states move
    gated = agents["gated"]
    taps = [Action.tap(0.3, 0.55)] * len(obs)
    opt = torch.optim.Adam(gated.parameters(), lr=1e-2)
    for _ in range(3):
        loss = -gated.log_prob(obs, taps).mean()
        opt.zero_grad()
        loss.backward()
        assert gated.module.encoder.cell_readback.out_proj.weight.grad.abs().sum() > 0
        opt.step()
    with torch.no_grad():
        elems = gated.module.encoder(gated.featurize(obs)).elems
    assert (elems - want.elems).abs().max() > 1e-3
    with pytest.raises(ValueError, match="cell_attention 'both'"):
        dataclasses.replace(base.config, cell_attention="both")
