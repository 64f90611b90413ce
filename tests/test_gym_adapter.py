import numpy as np
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
