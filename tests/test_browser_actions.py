"""Long press, wait, open app and answer on the browser device, in real headless Chromium with
pages served from loopback (and from a custom suite file)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from devicerl.actions import Action
from devicerl.envs import make
from devicerl.tasks import Task
from devicerl.tasks.custom import load_suite

pytestmark = pytest.mark.browser

#: Records how long the pointer was held on the pad, by the page's own event clock.
PRESS = """<html><body style="margin:0">
<div id="pad" style="position:absolute;left:0;top:0;width:200px;height:200px;background:#9cf"
     oncontextmenu="return false"></div>
<a id="next" href="/other.html" style="position:absolute;left:10px;top:250px">Other page</a>
<script>
const pad = document.getElementById("pad");
pad.addEventListener("pointerdown", e => { window.__down = e.timeStamp; window.__kind = e.pointerType; });
pad.addEventListener("pointerup", e => { window.__held = e.timeStamp - window.__down; });
</script></body></html>"""  # noqa: E501
OTHER = "<html><body><p>other page</p></body></html>"


class _Pages(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = {"/press.html": PRESS, "/other.html": OTHER}.get(self.path.split("?")[0])
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write((body or "missing").encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def base():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _task(base: str, success_js: str, steps: int = 10) -> Task:
    params = {"url": base + "/press.html", "success_js": success_js}
    return Task("web/press", max_steps=steps, env="browser", params=params)


@pytest.mark.parametrize("viewport,pointer", [((400, 300), "mouse"), ("phone", "touch")])
def test_long_press_holds_the_pointer_down_for_its_duration(base, viewport, pointer) -> None:
    env = make("browser", viewport=viewport, screenshot=False)
    try:
        # the page's own check: a pointer of the expected kind was held at least 0.8 s
        check = f"window.__kind === '{pointer}' && window.__held >= 800"
        obs = env.reset(_task(base, check), seed=0)
        pad = next(e for e in obs.elements if e.attrs.get("id") == "pad")
        point = obs.to_normalised(*pad.center)
        assert not env.step(Action.tap(*point)).info["success"]  # a tap is no long press
        r = env.step(Action.long_press(*point, duration_s=1.0))
        assert r.info["success"] and r.terminated and r.reward == 1.0
    finally:
        env.close()


def test_wait_waits_and_open_app_is_recorded_invalid(base) -> None:
    env = make("browser", viewport=(400, 300), screenshot=False)
    try:
        env.reset(_task(base, "false"), seed=0)
        r = env.step(Action.wait(1.0))
        assert r.info["device_time_s"] >= 1.0 and not r.done  # a lower bound: it slept
        assert "invalid_action" not in r.info and "noop" not in r.info
        r = env.step(Action.open_app("Settings"))  # never an exception
        assert r.info["invalid_action"] == "open_app is not an action of a browser: it has no apps"
        assert not r.done and env.steps_taken == 2
    finally:
        env.close()


def test_the_page_reads_the_last_answer_across_navigations_and_episodes(base) -> None:
    env = make("browser", viewport=(400, 300), screenshot=False)
    try:
        task = _task(base, "window.__drl.answer === '42' && location.pathname === '/other.html'")
        obs = env.reset(task, seed=0)
        assert not env.step(Action.answer("41")).done  # a wrong answer ends nothing
        r = env.step(Action.answer("42"))
        assert not r.done  # right answer, but the check also wants the other page
        link = next(e for e in obs.elements if e.attrs.get("id") == "next")
        r = env.step(Action.tap(*obs.to_normalised(*link.center)))  # a new document
        assert r.observation.extras["url"].endswith("/other.html")
        assert r.info["success"] and r.terminated  # it still read the answer
        env.reset(_task(base, "window.__drl.answer === null"), seed=1)  # a fresh episode
        assert env.step(Action.wait(0.1)).info["success"]
    finally:
        env.close()


def test_a_custom_task_checks_the_answer(tmp_path) -> None:
    (tmp_path / "count.html").write_text(
        "<html><body><script>window.devicerlReset = f => { document.body.innerHTML = "
        "'<p>' + 'x'.repeat(Number(f.n)) + '</p>'; };</script></body></html>"
    )
    (tmp_path / "s.yaml").write_text(
        "tasks:\n"
        "  - name: count\n    page: count.html\n    instruction: How many x are shown?\n"
        "    fields: {n: ['2', '3', '5']}\n    success: answer === fields.n\n"
        "    failure: answer !== null && answer !== fields.n\n"
    )
    (task,) = load_suite(tmp_path / "s.yaml")
    env = make("browser", screenshot=False)
    try:
        obs = env.reset(task, seed=2)
        n = obs.extras["fields"]["n"]
        assert obs.elements[0].text == "x" * int(n)
        r = env.step(Action.answer(n))
        assert r.terminated and r.info["success"]
        env.reset(task, seed=2)
        r = env.step(Action.answer(n + "0"))
        assert r.terminated and not r.info["success"]
    finally:
        env.close()
