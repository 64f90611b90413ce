"""Custom task suites from a file: loading and its one-line errors, the loopback page server,
and real episodes in headless Chromium on the example suite (examples/custom-suite)."""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from _holes import SYN, cli, snapshot

from devicerl.actions import Action
from devicerl.envs.browser.local_pages import PageServer
from devicerl.errors import TaskError
from devicerl.tasks import resolve
from devicerl.tasks.custom import draw_fields, instruction, load_suite

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "custom-suite" / "suite.yaml"


def served() -> int:
    """How many folders this process's page servers serve now."""
    with PageServer._lock:
        return len(PageServer._servers)


def test_the_example_suite_loads_with_its_tasks() -> None:
    tasks = resolve(str(EXAMPLE))
    assert [t.name for t in tasks] == [
        "example/press-color",
        "example/tick-item",
        "example/type-word",
    ]
    assert [t.max_steps for t in tasks] == [3, 5, 5]
    press = tasks[0]
    assert press.env == "browser" and press.params["viewport"] == [160, 210]
    assert (
        Path(press.params["root"]) / press.params["page"]
        == EXAMPLE.parent / "pages" / "press-color.html"
    )
    fields = draw_fields(press, 7)
    assert fields == draw_fields(press, 7) and fields["color"] in ("red", "green", "blue", "yellow")
    assert instruction(press, fields) == f"Press the {fields['color']} button."
    assert len({draw_fields(press, s)["color"] for s in range(40)}) == 4  # seeds vary instances


def test_jsonl_and_templates(tmp_path) -> None:
    (tmp_path / "p.html").write_text("<button>ok</button>")
    lines = [
        {"name": "a", "page": "p.html", "success": "true", "instruction": "Say {{{w}}} {w}",
         "fields": {"w": ["hi"]}},
        {"name": "b", "url": "https://example.org/x", "success": "document.title == 'x'"},
    ]  # fmt: skip
    suite = tmp_path / "my tasks.jsonl"
    suite.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    a, b = load_suite(suite)
    assert (a.name, b.name) == ("my-tasks/a", "my-tasks/b")
    assert instruction(a, draw_fields(a, 0)) == "Say {hi} hi"
    assert b.params["url"] == "https://example.org/x" and "root" not in b.params


BAD = [
    ("tasks: []", "lists no task"),
    ("tasks: [{name: a, page: p.html}]", "tasks[0].success: a JavaScript expression is needed"),
    ("tasks: [{name: a, success: 'true'}]", "tasks[0]: give either page (a local HTML file) or url"),  # noqa: E501
    ("tasks: [{name: a, page: ../outside.html, success: 'true'}]", "tasks[0].page {d}/../outside.html leads outside {d}: refused"),  # noqa: E501
    ("tasks: [{name: a, page: /etc/passwd, success: 'true'}]", "tasks[0].page /etc/passwd: must be relative to the suite file's folder"),  # noqa: E501
    ("tasks: [{name: a, page: link.html, success: 'true'}]", "tasks[0].page {d}/link.html leads outside {d}: refused"),  # noqa: E501
    ("tasks: [{name: a, page: none.html, success: 'true'}]", "tasks[0].page none.html: no such file in {d}"),  # noqa: E501
    ("tasks: [{name: a, url: 'file:///etc/passwd', success: 'true'}]", "tasks[0].url 'file:///etc/passwd': must be an http:// or https:// URL"),  # noqa: E501
    ("tasks: [{name: ../a, page: p.html, success: 'true'}]", "tasks[0].name '../a' must be letters, digits, '.', '_' or '-'"),  # noqa: E501
    ("suite: ../up\ntasks: [{name: a, page: p.html, success: 'true'}]", "suite name '../up' must be letters"),  # noqa: E501
    ("tasks: [{name: a, page: p.html, success: 'true'}, {name: a, page: p.html, success: 'true'}]", "tasks[1].name 'a' is given twice"),  # noqa: E501
    ("tasks: [{name: a, page: p.html, success: 'true', instruction: 'Hi {who}'}]", "tasks[0].instruction: {{who}} is not one of its fields"),  # noqa: E501
    ("tasks: [{name: a, page: p.html, success: 'true', max_steps: 0}]", "tasks[0].max_steps=0: must be in [1, 200]"),  # noqa: E501
    ("tasks: [{name: a, page: p.html, success: 'true', max_steps: .inf}]", "tasks[0].max_steps=inf: must be a finite number"),  # noqa: E501
    ("tasks: [{name: a, page: p.html, success: 'true', viewport: [1, 99999]}]", "tasks[0].viewport [1, 99999]: width and height must be in [16, 4096]"),  # noqa: E501
    ("tasks: [{name: a, page: p.html, succes: 'true'}]", "unknown config key 'tasks[0].succes' (did you mean 'success'?)"),  # noqa: E501
    ("tasks:\n  - {name: a, page: p.html, success: 'true'}\ntasks: []", "line 3, column 1: duplicate key 'tasks'"),  # noqa: E501
]  # fmt: skip


@pytest.mark.parametrize("text,why", BAD, ids=[w[:40] for _, w in BAD])
def test_a_bad_suite_file_is_one_line_naming_the_key(text, why, tmp_path) -> None:
    (tmp_path / "p.html").write_text("<p>x</p>")
    (tmp_path.parent / "outside.html").write_text("secret")
    (tmp_path / "link.html").symlink_to(tmp_path.parent / "outside.html")
    suite = tmp_path / "suite.yaml"
    suite.write_text(text)
    with pytest.raises(TaskError) as e:
        load_suite(suite)
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"suite {suite}: ")
    assert why.format(d=tmp_path) in message, message


def test_train_refuses_a_bad_suite_before_writing(tmp_path, capsys) -> None:
    (tmp_path / "suite.yaml").write_text("tasks: [{name: a, url: 'ftp://x', success: 'true'}]")
    before = snapshot(tmp_path)
    r = cli(capsys, "train", "--out", tmp_path / "out", *SYN, f"tasks.train={tmp_path}/suite.yaml")
    assert r.one_line() == (
        f"devicerl train: error: tasks.train: suite {tmp_path}/suite.yaml: tasks[0].url 'ftp://x': "
        "must be an http:// or https:// URL"
    )
    assert snapshot(tmp_path) == before


def test_the_page_server_serves_only_regular_files_of_its_folder(tmp_path) -> None:
    site = tmp_path / "site"
    (site / "sub").mkdir(parents=True)
    (site / "a.html").write_text("page a")
    (tmp_path / "secret.txt").write_text("secret")
    (site / "out.html").symlink_to(tmp_path / "secret.txt")
    base = PageServer.acquire(site)
    try:
        assert urllib.request.urlopen(base + "a.html", timeout=10).read() == b"page a"
        for path in ("out.html", "../secret.txt", "%2e%2e/secret.txt", "sub/", ""):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(base + path, timeout=10)
            assert e.value.code == 404, path
        assert PageServer.acquire(site) == base  # shared by the devices of a process
        PageServer.release(site)
    finally:
        PageServer.release(site)
    assert served() == 0


def _tap(obs, text):
    el = next(e for e in obs.elements if e.text.strip() == text)
    return Action.tap(*obs.to_normalised(*el.center))


@pytest.mark.browser
def test_real_episodes_on_the_example_pages(tmp_path) -> None:
    from devicerl.envs import make

    press, tick, word = resolve(str(EXAMPLE))
    env = make("browser", screenshot=False)
    try:
        obs = env.reset(press, seed=3)
        color = obs.extras["fields"]["color"]
        assert obs.instruction == f"Press the {color} button." and obs.screen_size == (160, 210)
        assert sorted(e.text for e in obs.elements) == ["blue", "green", "red", "yellow"]
        wrong = next(c for c in ("red", "green", "blue", "yellow") if c != color)
        r = env.step(_tap(obs, wrong))  # the failure check ends the episode, unsuccessful
        assert r.terminated and not r.info["success"]
        obs = env.reset(press, seed=3)
        r = env.step(_tap(obs, color))
        assert r.terminated and r.info["success"] and r.reward == 1.0

        obs = env.reset(tick, seed=8)
        item = obs.extras["fields"]["item"]
        assert not env.step(_tap(obs, item)).terminated
        r = env.step(_tap(obs, "Submit"))
        assert r.terminated and r.info["success"]

        obs = env.reset(word, seed=1)
        box = next(e for e in obs.elements if e.editable)
        env.step(Action.tap(*obs.to_normalised(*box.center)))
        env.step(Action.type_text(obs.extras["fields"]["word"]))
        r = env.step(_tap(obs, "Send"))
        assert r.terminated and r.info["success"]
    finally:
        env.close()
    assert served() == 0  # the device released its page server


@pytest.mark.browser
def test_a_broken_success_check_stops_with_one_line(tmp_path) -> None:
    from devicerl.envs import make

    shutil.copy(EXAMPLE.parent / "pages" / "type-word.html", tmp_path / "p.html")
    (tmp_path / "s.yaml").write_text("tasks: [{name: t, page: p.html, success: 'window.(('}]")
    (task,) = load_suite(tmp_path / "s.yaml")
    env = make("browser", screenshot=False)
    try:
        with pytest.raises(TaskError, match=r"^task s/t: its success check failed: SyntaxError"):
            env.reset(task, seed=0)
    finally:
        env.close()


def test_the_example_training_config_is_valid_as_shipped(monkeypatch) -> None:
    from devicerl.config import load_config
    from devicerl.runtime.setup.config import TrainConfig
    from devicerl.runtime.setup.preflight import check_run_config

    monkeypatch.chdir(EXAMPLE.parents[2])  # its paths are relative to the repository root
    cfg = load_config(TrainConfig, EXAMPLE.parent / "train.yaml")
    check_run_config(cfg)  # tasks resolve, device options and agent check out
    assert cfg.tasks.train == "examples/custom-suite/suite.yaml" and cfg.agent.kind == "small"
