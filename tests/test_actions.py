import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devicerl.actions import (
    MAX_APP_NAME,
    MAX_DURATION_S,
    TAP_DISTANCE_THRESHOLD,
    Action,
    ActionType,
    format_autoui,
    parse_autoui,
)
from devicerl.errors import DataError

coord = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
nasty = st.one_of(
    st.text(),
    st.sampled_from(
        [
            "hello, world",
            'say "hi", then leave',
            "a, b, c ,d",
            "[0.5, 0.5]",
            '", "lift_point": "[0.1, 0.1]"',
            "line1\nline2\r\n\ttab",
            'back\\slash \\" escaped',
            "emoji 😀 ñ 中文 עברית",
            '"typed_text": "x"',
            'Action Decision: "action_type": "PRESS_HOME"',
            "",
            " ",
            "}",
            "'single' quotes",
        ]
    ),
)


seconds = st.floats(min_value=0.0, max_value=MAX_DURATION_S, exclude_min=True)
app_names = st.text(
    st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp", "Co", "Cn", "Cf")),
    min_size=1,
    max_size=MAX_APP_NAME,
).filter(lambda s: s.strip() and s.isprintable())


def actions() -> st.SearchStrategy[Action]:
    return st.one_of(
        st.builds(lambda x, y: Action.tap(x, y), coord, coord),
        st.builds(lambda a, b, c, d: Action.swipe(a, b, c, d), coord, coord, coord, coord),
        st.builds(Action.type_text, nasty),
        st.sampled_from(
            [Action.back(), Action.home(), Action.enter(), Action.complete(), Action.impossible()]
        ),
        st.builds(Action.long_press, coord, coord, seconds),
        st.builds(Action.wait, seconds),
        st.builds(Action.open_app, app_names),
        st.builds(Action.answer, nasty.filter(str.strip)),
    )


@given(actions())
@settings(max_examples=500)
def test_autoui_round_trip(action: Action) -> None:
    text = format_autoui(action)
    assert parse_autoui(text) == action


@given(actions())
@settings(max_examples=300)
def test_json_round_trip(action: Action) -> None:
    assert Action.from_json(action.to_json()) == action
    assert Action.from_dict(json.loads(json.dumps(action.to_dict()))) == action


def test_invalid_json_round_trip() -> None:
    a = Action.invalid('garbage, "x"', "no action_type found")
    assert Action.from_json(a.to_json()) == a


@given(st.text())
@settings(max_examples=10_000, deadline=None)
def test_parse_never_raises(text: str) -> None:
    a = parse_autoui(text)
    assert isinstance(a, Action)
    if a.is_invalid:
        assert a.raw == text and a.reason


@given(st.binary())
@settings(max_examples=500)
def test_parse_bytes_like_garbage(data: bytes) -> None:
    a = parse_autoui(data.decode("utf-8", errors="replace"))
    assert isinstance(a, Action)


def test_parse_non_string_is_invalid() -> None:
    assert parse_autoui(None).is_invalid  # type: ignore[arg-type]
    assert parse_autoui(42).is_invalid  # type: ignore[arg-type]


def test_points_are_written_y_first() -> None:
    text = format_autoui(Action.tap(0.25, 0.75), precision=2)
    assert '"touch_point": "[0.75, 0.25]"' in text
    a = parse_autoui(text)
    assert a.touch == (0.25, 0.75)


def test_reference_format_and_unescaped_commas() -> None:
    ref = (
        'Action Plan: [DUAL_POINT,TYPE] ; Action Decision: "action_type": "DUAL_POINT", '
        '"touch_point": "[0.62, 0.50]", "lift_point": "[0.62, 0.50]", "typed_text": ""'
    )
    a = parse_autoui(ref)
    assert a.is_tap and a.touch == (0.5, 0.62)
    # The reference parser splits on ", " and fails here; ours must not.
    typed = (
        'Action Plan: [TYPE] ; Action Decision: "action_type": "TYPE", "touch_point": '
        '"[-1.0, -1.0]", "lift_point": "[-1.0, -1.0]", "typed_text": "Paris, France, "best" hotels"'
    )
    a = parse_autoui(typed)
    assert a.type is ActionType.TYPE and a.text == 'Paris, France, "best" hotels'


def test_loose_forms() -> None:
    assert parse_autoui('{"action_type": "TAP", "touch_point": [0.1, 0.2]}').touch == (0.2, 0.1)
    assert parse_autoui("action_type: press_back").type is ActionType.PRESS_BACK
    assert parse_autoui("'action_type': 'TYPE', 'typed_text': 'it''s'").type is ActionType.TYPE
    assert parse_autoui('"action_type": "STATUS_TASK_COMPLETE"').is_terminal


@pytest.mark.parametrize(
    "text,reason",
    [
        ("", "empty output"),
        ("hello", "no action_type"),
        ('"action_type": "FLY"', "unknown action_type"),
        ('"action_type": "DUAL_POINT"', "touch_point missing"),
        ('"action_type": "DUAL_POINT", "touch_point": "[1.5, 0.2]"', "outside [0, 1]"),
        ('"action_type": "DUAL_POINT", "touch_point": "[nan, 0.2]"', "touch_point missing"),
        ('"action_type": "TYPE"', "without typed_text"),
    ],
)
def test_invalid_reasons(text: str, reason: str) -> None:
    a = parse_autoui(text)
    assert a.is_invalid and a.raw == text
    assert reason in a.reason, a.reason


def test_tap_vs_swipe_threshold() -> None:
    assert Action.swipe(0.5, 0.5, 0.5, 0.5 + TAP_DISTANCE_THRESHOLD * 0.9).is_tap
    s = Action.swipe(0.5, 0.8, 0.5, 0.2)
    assert s.is_swipe and s.swipe_direction == "up"
    assert Action.swipe(0.2, 0.5, 0.9, 0.5).swipe_direction == "right"


def test_constructor_validation() -> None:
    with pytest.raises(ValueError):
        Action.tap(1.2, 0.3)
    with pytest.raises(ValueError):
        Action.tap(math.nan, 0.3)
    with pytest.raises(ValueError):
        Action(ActionType.PRESS_BACK, touch=(0.1, 0.1))
    with pytest.raises(DataError):
        Action.from_json('{"type": "WARP"}')
    with pytest.raises(DataError, match="malformed action JSON"):
        Action.from_json("{not json")


def test_invalid_format_keeps_raw() -> None:
    a = Action.invalid("blah", "no action_type found")
    assert format_autoui(a) == "blah"
    assert a.describe().startswith("invalid")
