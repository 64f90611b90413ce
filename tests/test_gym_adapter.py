import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from devicerl.envs import make
from devicerl.tasks import resolve
from devicerl.tasks.gym_adapter import GymDeviceEnv


def test_check_env_passes() -> None:
    env = GymDeviceEnv(make("synthetic", screen=(64, 96)), resolve("synthetic"))
    check_env(env, skip_render_check=True)


def test_gym_episode() -> None:
    env = GymDeviceEnv(make("synthetic", screen=(64, 96)), resolve("synthetic/tap"))
    obs, info = env.reset(seed=5)
    assert obs["screenshot"].shape == (96, 64, 3) and info["task"] == "synthetic/tap"
    done = False
    n = 0
    while not done:
        obs, _r, term, trunc, info = env.step(env.action_space.sample())
        done = term or trunc
        n += 1
    assert n <= 5
    obs2, _ = env.reset(seed=5)
    obs3, _ = env.reset(seed=5)
    assert np.array_equal(obs2["screenshot"], obs3["screenshot"])


def test_action_indices_stay_and_new_types_map_to_typed_actions() -> None:
    from devicerl.actions import AITW_TYPES, MAX_DURATION_S, VALID_TYPES, Action, ActionType

    env = GymDeviceEnv(make("synthetic", screen=(64, 96)), resolve("synthetic/tap"))
    assert env.action_space["action_type"].n == len(VALID_TYPES)
    base = {"touch": (0.25, 0.5), "lift": (0.25, 0.5), "text": "", "duration": (0.25,)}

    def to(kind: ActionType, **kw) -> Action:
        return env.to_action({**base, **kw, "action_type": VALID_TYPES.index(kind)})

    assert [VALID_TYPES.index(t) for t in AITW_TYPES] == list(range(7))  # saved indices hold
    assert to(ActionType.DUAL_POINT) == Action.tap(0.25, 0.5)
    assert to(ActionType.TYPE, text="hi") == Action.type_text("hi")
    assert to(ActionType.LONG_PRESS) == Action.long_press(0.25, 0.5, 0.25 * MAX_DURATION_S)
    assert to(ActionType.WAIT, duration=(0.1,)).duration_s == pytest.approx(1.0)
    assert to(ActionType.OPEN_APP, text="Clock") == Action.open_app("Clock")
    assert to(ActionType.ANSWER, text="42") == Action.answer("42")
    empty = to(ActionType.OPEN_APP)
    assert empty.is_invalid and "non-empty app name" in empty.reason
    zero = to(ActionType.WAIT, duration=(0.0,))
    assert zero.is_invalid and "WAIT duration_s" in zero.reason
    without = {k: v for k, v in base.items() if k != "duration"}
    assert env.to_action({**without, "action_type": VALID_TYPES.index(ActionType.WAIT)}) == (
        Action.wait()
    )
    env.close()
