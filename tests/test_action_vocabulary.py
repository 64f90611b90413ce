"""The action types beyond AitW's seven: long press, open app, wait, answer."""

import json

import pytest

from devicerl.actions import (
    AITW_TYPES,
    DEFAULT_PRESS_S,
    DEFAULT_WAIT_S,
    MAX_DURATION_S,
    VALID_TYPES,
    Action,
    ActionType,
    format_autoui,
    parse_autoui,
)
from devicerl.errors import DataError

NEW = (
    Action.long_press(0.25, 0.75, 2.5),
    Action.open_app("Simple Calendar Pro"),
    Action.wait(0.5),
    Action.answer('3 pm, room "B"'),
)


def test_valid_types_keep_aitw_indices_and_add_the_new_ones_after() -> None:
    assert VALID_TYPES[: len(AITW_TYPES)] == AITW_TYPES
    assert VALID_TYPES[len(AITW_TYPES) :] == (
        ActionType.LONG_PRESS,
        ActionType.OPEN_APP,
        ActionType.WAIT,
        ActionType.ANSWER,
    )
    assert ActionType.INVALID not in VALID_TYPES


def test_constructors_fill_typed_fields() -> None:
    press, app, wait, answer = NEW
    assert press.type is ActionType.LONG_PRESS and press.touch == (0.25, 0.75)
    assert press.lift is None and press.duration_s == 2.5 and not press.is_tap
    assert app.type is ActionType.OPEN_APP and app.app == "Simple Calendar Pro" and not app.text
    assert wait.type is ActionType.WAIT and wait.duration_s == 0.5 and wait.touch is None
    assert answer.type is ActionType.ANSWER and answer.text == '3 pm, room "B"'
    assert not any(a.is_terminal or a.is_invalid for a in NEW)
    assert Action.long_press(0.5, 0.5).duration_s == DEFAULT_PRESS_S
    assert Action.wait().duration_s == DEFAULT_WAIT_S
    assert isinstance(Action.wait(2).duration_s, float)


def test_json_is_typed_and_round_trips() -> None:
    press, app, wait, answer = NEW
    assert press.to_dict() == {"type": "LONG_PRESS", "touch": [0.25, 0.75], "duration_s": 2.5}
    assert app.to_dict() == {"type": "OPEN_APP", "app": "Simple Calendar Pro"}
    assert wait.to_dict() == {"type": "WAIT", "duration_s": 0.5}
    assert answer.to_dict() == {"type": "ANSWER", "text": '3 pm, room "B"'}
    for a in NEW:
        assert Action.from_json(a.to_json()) == a
        assert Action.from_dict(json.loads(a.to_json())).to_json() == a.to_json()


def test_autoui_extension_round_trips_and_keeps_typed_text_last() -> None:
    for a in NEW:
        text = format_autoui(a)
        assert text.rstrip().split(", ")[-1].startswith('"typed_text"') or a is NEW[3]
        assert parse_autoui(text) == a
        assert parse_autoui(format_autoui(a, precision=3)).type is a.type
    assert '"duration": 2.5' in format_autoui(NEW[0])
    assert '"app_name": "Simple Calendar Pro"' in format_autoui(NEW[1])


def test_describe() -> None:
    assert [a.describe() for a in NEW] == [
        "long_press(0.250, 0.750, 2.5 s)",
        "open_app('Simple Calendar Pro')",
        "wait(0.5 s)",
        "answer('3 pm, room \"B\"')",
    ]


@pytest.mark.parametrize(
    "build,match",
    [
        (lambda: Action.long_press(0.5, 0.5, 0), "LONG_PRESS duration_s must be in"),
        (lambda: Action.long_press(0.5, 0.5, MAX_DURATION_S + 0.1), "must be in"),
        (lambda: Action.long_press(0.5, 0.5, float("nan")), "must be in"),
        (lambda: Action.long_press(0.5, 0.5, True), "a number of seconds"),
        (lambda: Action.long_press(0.5, 0.5, "1"), "a number of seconds"),  # type: ignore[arg-type]
        (lambda: Action.long_press(1.5, 0.5), "outside the normalised screen"),
        (lambda: Action(ActionType.LONG_PRESS, (0.1, 0.1), (0.2, 0.2), duration_s=1), "no lift"),
        (lambda: Action(ActionType.LONG_PRESS, duration_s=1.0), "needs a touch point"),
        (lambda: Action.wait(-1), "WAIT duration_s must be in"),
        (lambda: Action(ActionType.WAIT), "a number of seconds"),
        (lambda: Action.open_app(""), "non-empty app name"),
        (lambda: Action.open_app("   "), "non-empty app name"),
        (lambda: Action.open_app("a\nb"), "printable"),
        (lambda: Action.open_app("x" * 101), "at most 100"),
        (lambda: Action.open_app(3), "must be a string"),  # type: ignore[arg-type]
        (lambda: Action.answer(""), "ANSWER needs a non-empty text"),
        (lambda: Action.answer(5), "text must be a string"),  # type: ignore[arg-type]
        (lambda: Action(ActionType.TYPE, text="x", duration_s=1.0), "TYPE takes no duration_s"),
        (lambda: Action(ActionType.PRESS_BACK, app="Chrome"), "PRESS_BACK takes no app"),
        (lambda: Action(ActionType.WAIT, text="x", duration_s=1.0), "WAIT takes no text"),
        (lambda: Action(ActionType.OPEN_APP, (0.5, 0.5), app="Chrome"), "takes no points"),
    ],
)
def test_invalid_inputs_raise_one_clear_error(build, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build()


@pytest.mark.parametrize(
    "record",
    [
        {"type": "LONG_PRESS", "touch": [0.5, 0.5]},
        {"type": "LONG_PRESS", "touch": [0.5, 0.5], "duration_s": "1"},
        {"type": "WAIT", "duration_s": 11},
        {"type": "OPEN_APP"},
        {"type": "ANSWER", "text": ""},
        {"type": "DUAL_POINT", "touch": [0.5, 0.5], "duration_s": 1.0},
    ],
)
def test_malformed_records_raise_data_error(record: dict) -> None:
    with pytest.raises(DataError, match="malformed action record"):
        Action.from_dict(record)


@pytest.mark.parametrize(
    "text,expected",
    [
        ('"action_type": "LONG_PRESS", "touch_point": "[0.2, 0.6]"', Action.long_press(0.6, 0.2)),
        ('{"action_type": "long_click", "touch_point": [0.2, 0.6], "time": 3}',
         Action.long_press(0.6, 0.2, 3.0)),
        ('"action_type": "WAIT"', Action.wait()),
        ('"action_type": "wait", "seconds": "2"', Action.wait(2.0)),
        ('"action_type": "OPEN_APP", "app_name": \'Clock\'', Action.open_app("Clock")),
        ('{"action_type": "open", "app": Chrome}', Action.open_app("Chrome")),
        ('"action_type": "ANSWER", "typed_text": "It is 5, "roughly""',
         Action.answer('It is 5, "roughly"')),
    ],
)  # fmt: skip
def test_loose_forms_of_the_new_types(text: str, expected: Action) -> None:
    assert parse_autoui(text) == expected


@pytest.mark.parametrize(
    "text,reason",
    [
        ('"action_type": "LONG_PRESS"', "LONG_PRESS touch_point missing"),
        ('"action_type": "LONG_PRESS", "touch_point": "[0.5, 0.5]", "duration": 0',
         "duration_s must be in"),
        ('"action_type": "WAIT", "duration": 1e400', "duration_s must be in"),
        ('"action_type": "OPEN_APP"', "OPEN_APP without app_name"),
        ('"action_type": "OPEN_APP", "app_name": ""', "non-empty app name"),
        ('"action_type": "ANSWER"', "ANSWER without typed_text"),
        ('"action_type": "ANSWER", "typed_text": " "', "non-empty text"),
    ],
)  # fmt: skip
def test_unusable_new_types_parse_to_invalid_with_the_reason(text: str, reason: str) -> None:
    a = parse_autoui(text)
    assert a.is_invalid and a.raw == text and reason in a.reason, a.reason


def test_the_store_keeps_the_new_types_and_their_type_column(tmp_path) -> None:
    from devicerl.data.store import TrajectoryStore, TrajectoryWriter
    from devicerl.records import EndReason, Observation, Step, Trajectory

    obs = Observation("Open the clock and tell the time", (90, 160))
    traj = Trajectory("t/x", obs.instruction, steps=[Step(obs, a) for a in NEW])
    traj.final_observation = obs
    traj.end(EndReason.AGENT_ENDED)
    with TrajectoryWriter(tmp_path / "store") as writer:
        writer.append(traj)
    store = TrajectoryStore(tmp_path / "store")
    (back,) = list(store)
    assert [s.action for s in back.steps] == list(NEW) and back.answer == NEW[3].text
    column = store.step_table().column("action_type").to_pylist()
    assert column == ["LONG_PRESS", "OPEN_APP", "WAIT", "ANSWER", None]


def test_the_small_agent_and_its_uniform_baseline_keep_aitw_types() -> None:
    from devicerl.agents.config import SmallAgentConfig
    from devicerl.agents.random import RandomPolicy, UniformPolicy
    from devicerl.envs import make

    with pytest.raises(ValueError, match="chooses among AitW's seven types"):
        SmallAgentConfig(allowed_types=("DUAL_POINT", "LONG_PRESS"))
    env = make("synthetic", screen=(96, 160), seed=0)
    observations = [env.reset("synthetic/type", seed=s) for s in range(20)]
    env.close()
    for policy in (UniformPolicy(seed=1), RandomPolicy(seed=1)):
        kinds = {s.action.type for s in policy.act(observations * 5)}
        assert kinds <= set(AITW_TYPES) and ActionType.DUAL_POINT in kinds
