"""benchmarks/demonstrations.py on real headless Chromium: scripted login-user demonstrations are
stored, read back as offline data, and every step is an action the small agent can express."""

from __future__ import annotations

import demonstrations as demos  # benchmarks/ (see conftest.py)
import pytest

from devicerl.actions import ActionType
from devicerl.agents.config import SmallAgentConfig
from devicerl.agents.small import UNREPRESENTABLE_LOG_PROB, SmallAgent
from devicerl.runtime.setup.offline import load_offline
from devicerl.tasks import SEED_RANGES


def test_login_demonstrations_are_stored_and_expressible(tmp_path):
    out = tmp_path / "demos"
    kept = demos.record(["login-user"], 2, out, {"screenshot": False, "task_pages": 2})
    assert kept == {"login-user": 2}
    trajs = load_offline(str(out))
    assert len(trajs) == 2
    lo, hi = SEED_RANGES["train"]
    agent = SmallAgent(
        SmallAgentConfig(allowed_types=(ActionType.DUAL_POINT, ActionType.TYPE), swipes=False)
    )
    for t in trajs:
        assert t.success and lo <= t.seed < hi and t.extras["demonstration"] == "scripted"
        kinds = [s.action.type for s in t.steps]
        assert kinds == [ActionType.DUAL_POINT, ActionType.TYPE] * 2 + [ActionType.DUAL_POINT]
        typed = [s.action.text for s in t.steps if s.action.type is ActionType.TYPE]
        assert all(f'"{w}"' in t.instruction for w in typed)
        seen = [t.agent_observation(i, s.observation) for i, s in enumerate(t.steps)]
        log_p = agent.log_prob(seen, [s.action for s in t.steps])
        assert bool((log_p > UNREPRESENTABLE_LOG_PROB / 2).all()), log_p


def test_an_unknown_task_or_a_used_folder_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="no scripted solver for not-a-task"):
        demos.record(["not-a-task"], 1, tmp_path / "x", {})
    with pytest.raises(SystemExit, match="exists"):
        demos.main(["--tasks", "login-user", "--out", str(tmp_path)])


def test_a_solver_outside_the_vocabulary_or_failing_ends_its_episode(monkeypatch):
    from reach_solvers import SOLVERS, Solver, SolverPolicy

    from devicerl.actions import Action
    from devicerl.records import Observation

    def goes_home(obs):
        yield Action.tap(0.5, 0.5)
        yield Action.home()  # outside ALLOWED: never played

    def fails(obs):
        raise LookupError("no element with {'text': 'Submit'}")
        yield  # a generator

    monkeypatch.setitem(SOLVERS, "x-home", Solver("x-home", (), goes_home))
    monkeypatch.setitem(SOLVERS, "x-fail", Solver("x-fail", (), fails))
    obs = Observation(instruction="do it", screen_size=(160, 210))
    home = SolverPolicy("x-home")
    assert home.act([obs])[0].action.type is ActionType.DUAL_POINT and not home.error
    for _ in range(2):  # refused, then stays refused
        assert home.act([obs])[0].action.type is ActionType.STATUS_TASK_IMPOSSIBLE
    assert "outside its vocabulary" in home.error
    fail = SolverPolicy("x-fail")
    assert fail.act([obs])[0].action.type is ActionType.STATUS_TASK_IMPOSSIBLE
    assert fail.error.startswith("LookupError: no element")
    with pytest.raises(ValueError, match="one episode at a time"):
        fail.act([obs, obs])
