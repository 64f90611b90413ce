"""Rule: nothing given is silently dropped or ignored. Two different tasks of one name (two
suite files) are refused; an agent option the run's agent does not read, or an
``agent.small`` option that a saved agent (``agent.path``) does not have, is refused; ``tasks``
options that only mean something with ``--reach`` are refused without it. Each in one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _holes import SYN, cli

from devicerl.agents.config import SmallAgentOptions
from devicerl.agents.small import SmallAgent
from devicerl.errors import TaskError
from devicerl.tasks import resolve

PAGES = Path(__file__).resolve().parents[1] / "examples" / "custom-suite" / "pages"


def _suite(folder: Path, success: str) -> Path:
    folder.mkdir()
    shutil.copy(PAGES / "press-color.html", folder / "p.html")
    (folder / "suite.yaml").write_text(
        f"suite: mine\ntasks: [{{name: press, page: p.html, success: '{success}'}}]\n"
    )
    return folder / "suite.yaml"


def test_one_task_name_from_two_suite_files_is_refused(tmp_path, capsys) -> None:
    a = _suite(tmp_path / "a", "window.pressed === 1")
    b = _suite(tmp_path / "b", "window.pressed === 2")
    with pytest.raises(TaskError, match="task mine/press is named twice"):
        resolve(f"{a},{b}")
    assert [t.name for t in resolve(f"{a},{a}")] == ["mine/press"]  # the same task twice
    r = cli(capsys, "train", "--out", tmp_path / "run", *SYN, f"tasks.train={a},{b}")
    assert "mine/press is named twice" in r.one_line() and not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def saved_agent(tmp_path_factory):
    path = tmp_path_factory.mktemp("agent") / "agent"
    options = SmallAgentOptions(d_model=32, allowed_types=("DUAL_POINT", "TYPE"), heads=())
    SmallAgent(options.architecture()).save(path)
    return path


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (["agent.small.heads=[points]"], "agent.small: heads ['points']"),
        (["agent.small.d_model=64"], "agent.small: d_model 64"),
        (["agent.small.epsilon=0.3"], "agent.small: epsilon 0.3"),
    ],
)
def test_a_saved_agent_refuses_small_options_it_does_not_have(
    saved_agent, overrides, named, tmp_path, capsys
) -> None:
    r = cli(capsys, "eval", "--out", tmp_path / "run", *SYN, f"agent.path={saved_agent}",
            *overrides)  # fmt: skip
    assert r.one_line().startswith(f"devicerl eval: error: {named}")


def test_small_options_a_saved_agent_has_are_fine(saved_agent, tmp_path, capsys) -> None:
    same = ["agent.small.allowed_types=[DUAL_POINT, TYPE]", "agent.small.heads=[]"]
    r = cli(capsys, "eval", "--out", tmp_path / "run", *SYN, f"agent.path={saved_agent}",
            *same, "eval.n_tasks=1")  # fmt: skip
    assert r.code == 0, r.err


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (["agent.api.chat.model=gpt"], "agent.api: the small agent does not read it"),
        (["agent.kind=random", "agent.small.heads=[]"], "agent.small: the random agent"),
        (["agent.kind=uniform", "agent.path=/tmp"], "agent.path: the uniform agent"),
        (["agent.vision_dir=/tmp"], "agent.vision_dir: the small agent"),
        (["agent.vlm={max_new_tokens: 9}"], "agent.vlm: the small agent"),
    ],
)
def test_an_agent_option_its_kind_does_not_read_is_refused(
    overrides, named, tmp_path, capsys
) -> None:
    r = cli(capsys, "train", "--out", tmp_path / "run", *SYN, "env_steps=4", *overrides)
    assert named in r.one_line() and not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--agent-set", "point_actions=true", "miniwob"], "--agent-set applies with --reach"),
        (["--agent", "/tmp", "miniwob"], "--agent applies with --reach"),
        (["--count", "--reach", "miniwob"], "--count and --reach"),
        (["--reach"], "--reach needs a task SPEC"),
    ],
)
def test_tasks_options_without_their_partner_are_refused(argv, named, capsys) -> None:
    assert named in cli(capsys, "tasks", *argv).one_line()
