"""Action codecs: every codec's text round-trips through parsing over random screens, image
geometries (the processor's resize, padding, crops) and actions; parsing never raises; the
families' own published examples read as they mean; the resize rule is the real processor's."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from devicerl.actions import MAX_DURATION_S, Action, ActionType
from devicerl.codecs import (
    CODECS,
    ImageGeometry,
    KeepSize,
    MobileUse,
    PromptStep,
    SmartResize,
    default_codec,
    fold_system,
    make_codec,
    openai_messages,
    smart_resize,
)
from devicerl.codecs.aguvis import Aguvis
from devicerl.codecs.qwen import MobileUseQwen3
from devicerl.codecs.uitars import UITars, UITars15
from devicerl.errors import ConfigError

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: The processors' own resize of a screenshot: Qwen2.5-VL's defaults and a small budget that
#: shrinks a phone screen several times over (a tiny model's, or a tight max_pixels).
RESIZES = [
    SmartResize(28, 4 * 28 * 28, 16384 * 28 * 28),
    SmartResize(32, 64 * 32 * 32, 16384 * 32 * 32),
    SmartResize(28, 3136, 3136 * 4),
    KeepSize(),
]

unit = st.floats(0.0, 1.0, allow_nan=False)
#: Text a model may type: any unicode, quotes, backslashes, brackets and line breaks included.
typed = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@st.composite
def screens(draw):
    """(screen width, height) in device pixels and the geometry of the image the model sees: the
    processor's resize, sometimes with the screen padded into or cropped by the image."""
    w = draw(st.integers(100, 3000))
    h = draw(st.integers(max(100, w // 4), min(3000, w * 4)))
    g = draw(st.sampled_from(RESIZES))(w, h)
    if draw(st.booleans()):
        iw, ih = g.size
        left, top = draw(st.floats(-0.2, 0.2)) * iw, draw(st.floats(-0.2, 0.2)) * ih
        bw, bh = draw(st.floats(0.6, 1.4)) * iw, draw(st.floats(0.6, 1.4)) * ih
        g = ImageGeometry(g.size, (left, top, bw, bh))
    return (w, h), g


seconds = st.floats(0.01, MAX_DURATION_S, allow_nan=False)
said = typed.filter(lambda t: t.strip() != "")
app = st.text(st.characters(whitelist_categories=("L", "N", "Zs", "P")), min_size=1,
              max_size=30).filter(lambda t: t.strip() != "" and t.isprintable())  # fmt: skip
#: Types without fields.
BARE = [ActionType.PRESS_BACK, ActionType.PRESS_HOME, ActionType.PRESS_ENTER,
        ActionType.STATUS_TASK_COMPLETE, ActionType.STATUS_TASK_IMPOSSIBLE]  # fmt: skip


@st.composite
def actions(draw):
    kind = draw(st.sampled_from(["tap", "swipe", "type", "long", "app", "wait", "answer", "bare"]))
    if kind == "tap":
        return Action.tap(draw(unit), draw(unit))
    if kind == "swipe":
        a = Action.swipe(draw(unit), draw(unit), draw(unit), draw(unit))
        assume(a.is_swipe and min(abs(a.touch[0] - a.lift[0]), abs(a.touch[1] - a.lift[1])) > 0.05)
        return a
    return {
        "type": lambda: Action.type_text(draw(typed)),
        "long": lambda: Action.long_press(draw(unit), draw(unit), draw(seconds)),
        "app": lambda: Action.open_app(draw(app)),
        "wait": lambda: Action.wait(draw(seconds)),
        "answer": lambda: Action.answer(draw(said)),
        "bare": lambda: Action(draw(st.sampled_from(BARE))),
    }[kind]()


def step_px(codec, geometry: ImageGeometry, screen: tuple[int, int]) -> tuple[float, float]:
    """One step of the codec's coordinates, in device pixels (x, y)."""
    frame = getattr(codec, "frame", None)
    sx, sy = frame.step(geometry) if frame is not None else (1e-3, 1e-3)  # 3 decimals
    return sx * screen[0], sy * screen[1]


@pytest.mark.parametrize("name", list(CODECS))
@SETTINGS
@given(screen=screens(), action=actions())
@example(screen=((100, 100), ImageGeometry((112, 112))), action=Action.type_text("\x00"))  # NUL
def test_format_then_parse_round_trips_within_a_device_pixel(name, screen, action) -> None:
    """Points come back within half a step of the codec's coordinates, which is within one
    device pixel wherever the codec's frame is at least as fine as two device pixels (pixels of
    a resized image; a 0-1000 grid on a screen up to 2000 pixels); everything else exactly;
    and the text of the parsed action is the text (a stable spelling)."""
    codec = make_codec(name)
    (w, h), g = screen
    text = codec.format(action, g)
    back = codec.parse(text, g)
    assert back.type is action.type and back.text == action.text, (text, back)
    assert (back.app, back.duration_s) == (action.app, action.duration_s), text
    assert codec.format(back, g) == text
    if action.touch is None:
        assert back == action
        return
    sx, sy = step_px(codec, g, (w, h))
    pairs = [(action.touch, back.touch)] + ([(action.lift, back.lift)] if action.lift else [])
    for p, q in pairs:
        ex, ey = abs(p[0] - q[0]) * w, abs(p[1] - q[1]) * h
        assert ex <= sx / 2 + 1e-6 and ey <= sy / 2 + 1e-6, (text, p, q)
        if sx <= 2 and sy <= 2:
            assert ex <= 1 + 1e-6 and ey <= 1 + 1e-6


@pytest.mark.parametrize("name", list(CODECS))
@SETTINGS
@given(text=st.one_of(st.text(max_size=80), st.binary(max_size=80).map(repr)), cut=st.integers())
def test_parsing_never_raises_and_keeps_what_it_cannot_read(name, text, cut) -> None:
    codec = make_codec(name)
    g = ImageGeometry((1092, 2408))
    valid = codec.format(Action.swipe(0.1, 0.9, 0.8, 0.2), g)
    for candidate in (text, valid[: cut % (len(valid) + 1)], valid + text, text + valid):
        action = codec.parse(candidate, g)
        assert isinstance(action, Action)
        if action.is_invalid:
            assert action.raw == candidate and action.reason
    assert codec.parse(None, g).is_invalid  # type: ignore[arg-type]


def test_the_families_own_examples_read_as_they_mean() -> None:
    phone = ImageGeometry((1092, 2408))  # the cookbook's screenshot after smart_resize
    qwen = MobileUse().parse(
        '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "click", "coordinate": '
        "[935, 406]}}\n</tool_call>",
        phone,
    )
    assert qwen.touch == pytest.approx((935 / 1092, 406 / 2408))
    qwen3 = MobileUseQwen3().parse(
        'Thought: To search, click the search bar.\nAction: "I tapped the bar."\n<tool_call>\n'
        '{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [447, 81]}}\n'
        "</tool_call>",
        phone,
    )
    assert qwen3.touch == pytest.approx((447 / 999, 81 / 999))
    tars15 = UITars15().parse("Thought: Click the button\nAction: click(start_box='(100,200)')",
                              ImageGeometry((1932, 1092)))  # fmt: skip
    assert tars15.touch == pytest.approx((100 / 1932, 200 / 1092))
    tars = UITars().parse("Action: click(start_box='<|box_start|>(235,512)<|box_end|>')", phone)
    assert tars.touch == pytest.approx((0.235, 0.512))
    assert UITars().parse("Action: type(content='it\\'s done\\n')", phone) == Action.type_text(
        "it's done\n"
    )
    assert UITars().parse("Action: type(content='say 'hi'')", phone).text == "say 'hi'"
    down = UITars().parse("Action: scroll(start_box='(500,500)', direction='down')", phone)
    assert down.swipe_direction == "up"  # showing what is below: the finger moves up
    aguvis = Aguvis().parse("pyautogui.click(x=0.8102, y=0.9463)", phone)
    assert aguvis.touch == pytest.approx((0.8102, 0.9463))
    swipe = Aguvis().parse("mobile.swipe(from_coord=[0.581,0.898],to_coord=[0.601,0.518])", phone)
    assert swipe.touch == pytest.approx((0.581, 0.898)) and swipe.swipe_direction == "up"
    assert Aguvis().parse("mobile.terminate(status='success')", phone) == Action.complete()
    assert MobileUse().parse(
        '<tool_call>{"name": "mobile_use", "arguments": {"action": "open", '
        '"text": "Clock"}}</tool_call>',
        phone,
    ) == Action.open_app("Clock")
    assert UITars().parse("Action: wait()", phone) == Action.wait(5.0)  # its sleep is 5 s
    assert Aguvis().parse("mobile.long_press(x=0.5, y=0.5)", phone).duration_s == 1.0
    for codec, text in [
        (MobileUse(), '<tool_call>{"name": "mobile_use", "arguments": {"action": '
                      '"system_button", "button": "Menu"}}</tool_call>'),
        (MobileUse(), '<tool_call>{"name": "mobile_use", "arguments": {"action": "wait", '
                      '"time": 0}}</tool_call>'),
        (MobileUse(), '<tool_call>{"name": "mobile_use", "arguments": {"action": "click", '
                      '"coordinate": [5000, 10]}}</tool_call>'),
        (UITars(), "Action: left_double(start_box='(10,10)')"),
        (Aguvis(), "os.system('rm -rf /')"),
        (Aguvis(), "pyautogui.click(x=__import__('os'), y=1)"),
    ]:  # fmt: skip
        action = codec.parse(text, phone)
        assert action.is_invalid and action.raw == text and action.reason, text


def test_smart_resize_is_the_real_processors() -> None:
    """The geometry computed before the processor runs is the image it makes (Qwen2.5-VL's
    14-pixel patches merged 2 x 2; Qwen3-VL's 16-pixel ones), across sizes and budgets."""
    import random

    from PIL import Image
    from transformers.models.qwen2_vl import Qwen2VLImageProcessorPil

    from devicerl.agents.vlm.geometry import processor_geometry

    rng = random.Random(0)
    for patch, low, high in [(14, 3136, 3136), (14, 3136, 200_000), (16, 4096, 60_000)]:
        proc = Qwen2VLImageProcessorPil(min_pixels=low, max_pixels=high, patch_size=patch,
                                        merge_size=2)  # fmt: skip
        for _ in range(12):
            w, h = rng.randint(20, 900), rng.randint(20, 900)
            grid = proc(images=[Image.new("RGB", (w, h))], return_tensors="pt")["image_grid_thw"]
            made = (int(grid[0, 2]) * patch, int(grid[0, 1]) * patch)
            assert processor_geometry(proc, w, h).size == made
            assert smart_resize(w, h, 2 * patch, low, high) == made


def test_prompts_are_each_familys() -> None:
    g = ImageGeometry((1092, 2408))
    done = (Action.tap(0.5, 0.5), Action.type_text("hi"))
    step = PromptStep("Open the clock", g, done)
    qwen = MobileUse().chat(step, MobileUse().system(g))
    assert "The screen's resolution is 1092x2408." in qwen[0]["content"][0]["text"]
    assert "<tools>" in qwen[0]["content"][0]["text"] and '"name": "mobile_use"' in str(qwen)
    text, image = qwen[1]["content"]  # the query, then the screenshot
    assert image == {"type": "image"} and text["text"].startswith("The user query: Open the")
    assert 'Step 1: {"name": "mobile_use", "arguments": {"action": "click", "coordinate": ' \
        '[546, 1204]}}; Step 2: ' in text["text"]  # fmt: skip
    assert "999x999" in MobileUseQwen3().system(g)
    assert "Step 1: Click at (500, 500).; Step 2: Type hi.;" in MobileUseQwen3().user_text(step)
    tars = UITars15().chat(step, "You are a helpful assistant.")
    assert [m["role"] for m in tars] == ["system", "user", "assistant", "assistant", "user"]
    assert tars[2]["content"][0]["text"] == (
        "Action: click(start_box='<|box_start|>(546,1204)<|box_end|>')"
    )  # history with box tokens, as the deploy guide adds them
    assert tars[-1]["content"] == [{"type": "image"}]
    assert "## User Instruction\nOpen the clock" in tars[1]["content"][0]["text"]
    assert "Previous actions:\nStep 1: pyautogui.click(x=0.5, y=0.5)\nStep 2:" in (
        Aguvis().user_text(step)
    )
    folded = fold_system(tars)
    assert [m["role"] for m in folded] == ["user", "assistant", "assistant", "user"]
    assert folded[0]["content"][0]["text"].startswith("You are a helpful assistant.\n\n")
    sent = openai_messages(tars, {"type": "image_url", "image_url": {"url": "data:x"}})
    assert sent[0] == {"role": "system", "content": "You are a helpful assistant."}
    assert sent[2] == {"role": "assistant", "content": tars[2]["content"][0]["text"]}
    assert sent[-1]["content"] == [{"type": "image_url", "image_url": {"url": "data:x"}}]


def test_codecs_by_name_and_family_defaults() -> None:
    assert default_codec("qwen2_5_vl") == "mobile_use"
    assert default_codec("qwen3_vl") == "mobile_use_qwen3"
    assert default_codec("qwen2_vl") == default_codec(None) == "json"
    with pytest.raises(ConfigError, match=r"^codec 'tars': expected one of json, autoui, "):
        make_codec("tars")
