"""The browser device on real headless Chromium, with pages served from a loopback server."""

from __future__ import annotations

import os
import signal
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import psutil
import pytest

from devicerl.actions import Action
from devicerl.envs import make
from devicerl.envs.browser import BrowserEnv, BrowserOptions
from devicerl.envs.browser.launcher import PROFILE_PREFIX
from devicerl.envs.browser.network import NetworkGuard, blocked_url_regex
from devicerl.errors import ConfigError, DeviceCrashed, DeviceTimeout
from devicerl.records import Observation
from devicerl.tasks import Task

pytestmark = pytest.mark.browser

FORM = """<html><body style="margin:0">
<form onsubmit="window.__submitted = document.getElementById('name').value; return false">
  <input id="name" type="text" placeholder="your name"
         style="position:absolute;left:10px;top:10px;width:200px;height:30px">
</form>
<button id="go" style="position:absolute;left:10px;top:60px;width:100px;height:40px"
  onclick="document.title = 'clicked:' + document.getElementById('name').value">Go</button>
<div id="box" style="position:absolute;left:10px;top:120px;width:50px;height:50px;
  background:red"></div>
<div id="hidden" style="display:none">invisible</div>
<a id="next" href="/page2.html" style="position:absolute;left:10px;top:200px">Next page</a>
</body></html>"""
PAGE2 = "<html><body><p id='p2'>Second page</p></body></html>"
DRAG = """<html><body style="margin:0;height:100%">
<script>
document.addEventListener('mousedown', e => { window.__down = [e.clientX, e.clientY]; });
document.addEventListener('mouseup', e => {
  window.__drag = {dx: e.clientX - window.__down[0], dy: e.clientY - window.__down[1]}; });
</script><div style="height:3000px">tall page</div></body></html>"""
HANG = """<html><body><button id="hang" style="width:200px;height:100px"
  onclick="while (true) {}">Hang</button></body></html>"""


class _Handler(BaseHTTPRequestHandler):
    pages: dict[str, str] = {}
    hits: list[str] = []

    def do_GET(self) -> None:
        self.hits.append(self.path)
        body = self.pages.get(self.path.split("?")[0])
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write((body or "missing").encode())

    def log_message(self, *args: object) -> None:
        pass


def _serve(pages: dict[str, str]) -> tuple[ThreadingHTTPServer, type[_Handler]]:
    handler = type("Handler", (_Handler,), {"pages": pages, "hits": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, handler


@pytest.fixture(scope="module")
def site():
    other, other_handler = _serve({"/b.png": ""})  # a second local server: not allow-listed
    pages = {"/form.html": FORM, "/page2.html": PAGE2, "/drag.html": DRAG, "/hang.html": HANG}
    pages["/net.html"] = (
        "<html><body><img src='http://blocked.example.com/a.png'>"
        f"<img src='http://127.0.0.1:{other.server_address[1]}/b.png'>"
        "<img src='/ok.png'><p>net</p></body></html>"
    )
    httpd, handler = _serve(pages)
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield base, handler, other_handler
    httpd.shutdown()
    other.shutdown()


@pytest.fixture(scope="module")
def env():
    device = make("browser", viewport=(400, 300))
    yield device
    device.close()


def _task(base: str, path: str, success_js: str | None = None, steps: int = 20) -> Task:
    params = {"url": base + path}
    if success_js:
        params["success_js"] = success_js
    return Task(f"web{path}", max_steps=steps, env="browser", params=params)


def _el(obs: Observation, html_id: str):
    return next(e for e in obs.elements if e.attrs.get("id") == html_id)


def _tap(obs: Observation, element) -> Action:
    return Action.tap(*obs.to_normalised(*element.center))


def test_elements_tap_type_and_task_success(env, site):
    base, _, _ = site
    obs = env.reset(_task(base, "/form.html", "document.title === 'clicked:hello'"), seed=0)
    assert obs.screen_size == (400, 300) and obs.screenshot.shape == (300, 400, 3)
    assert obs.screenshot.dtype == np.uint8 and obs.screenshot.std() > 5  # not a blank image
    name, go, box, link = (_el(obs, i) for i in ("name", "go", "box", "next"))
    assert name.editable and name.clickable and name.role == "textbox" and not name.focused
    assert name.attrs["placeholder"] == "your name" and name.bbox == (10.0, 10.0, 210.0, 40.0)
    assert go.clickable and go.role == "button" and go.text == "Go" and not go.editable
    assert box.role == "group" and not box.clickable and box.attrs["bg"] == "rgb(255, 0, 0)"
    assert link.role == "link" and link.text == "Next page" and link.clickable
    assert "invisible" not in [e.text for e in obs.elements]
    ids = {e.attrs.get("id"): e.id for e in obs.elements}

    r = env.step(_tap(obs, name))
    assert _el(r.observation, "name").focused and not r.done
    r = env.step(Action.type_text("hello"))
    assert _el(r.observation, "name").value == "hello"
    assert {e.attrs.get("id"): e.id for e in r.observation.elements} == ids  # stable ids
    r = env.step(_tap(r.observation, go))
    assert r.reward == 1.0 and r.terminated and r.info["success"]
    assert r.info["blocked_requests"] == 0 and r.observation.extras["url"].endswith("/form.html")


def test_enter_invalid_and_terminal_actions(env, site):
    base, _, _ = site
    obs = env.reset(_task(base, "/form.html", "window.__submitted === 'abc'"), seed=1)
    r = env.step(Action.invalid("gibberish", "unparseable"))
    assert r.info["invalid_action"] == "unparseable" and not r.done
    env.step(_tap(obs, _el(obs, "name")))
    env.step(Action.type_text("abc"))
    r = env.step(Action.enter())
    assert r.info["success"] and r.terminated

    env.reset(_task(base, "/form.html"), seed=2)
    r = env.step(Action.complete())
    assert r.terminated and r.info["end_reason"] == "agent_ended" and r.reward == 0.0


def test_back_home_and_step_budget(env, site):
    base, _, _ = site
    obs = env.reset(_task(base, "/form.html", steps=3), seed=0)
    r = env.step(_tap(obs, _el(obs, "next")))
    assert r.observation.extras["url"].endswith("/page2.html")
    assert r.observation.elements[0].text == "Second page"
    r = env.step(Action.back())
    assert r.observation.extras["url"].endswith("/form.html")
    r = env.step(Action.home())
    assert r.truncated and r.info["end_reason"] == "max_steps"


def test_swipe_drags_on_desktop_and_scrolls_on_phone(env, site):
    base, _, _ = site
    env.reset(_task(base, "/drag.html", "window.__drag && window.__drag.dx > 100"), seed=0)
    r = env.step(Action.swipe(0.1, 0.5, 0.9, 0.5))
    assert r.info["success"]

    phone = make("browser", viewport="phone", screenshot=False)
    try:
        obs = phone.reset(_task(base, "/drag.html", "window.scrollY > 300"), seed=0)
        assert obs.screen_size == (540, 1170) and obs.screenshot is None
        r = phone.step(Action.swipe(0.5, 0.8, 0.5, 0.2))
        assert r.info["success"]
        assert phone.browser_pid == env.browser_pid  # devices of a process share one Chromium
    finally:
        phone.close()


def test_network_allow_list_blocks_and_counts(env, site):
    base, handler, other_handler = site
    env.reset(_task(base, "/net.html"), seed=0)
    r = env.step(Action.tap(0.5, 0.5))
    hosts = r.info["blocked_hosts"]
    assert r.info["blocked_requests_total"] == 2
    assert hosts["blocked.example.com"] == 1 and len(hosts) == 2
    assert "/ok.png" in handler.hits  # the task's own server is allowed
    assert other_handler.hits == []  # the other local server was never reached
    env.reset(_task(base, "/form.html"), seed=0)
    assert env.step(Action.tap(0.5, 0.5)).info["blocked_requests_total"] == 0


def test_allow_list_patterns():
    import re

    rx = re.compile(blocked_url_regex(["127.0.0.1:8000", "*.example.org"]))
    assert not rx.match("http://127.0.0.1:8000/x") and not rx.match("https://a.example.org/")
    assert not rx.match("data:text/html,hi")
    for url in ("http://127.0.0.1:8001/", "http://example.org.evil.com/", "file:///etc/passwd",
                "http://127.0.0.1:8000@evil.com/", "ws://evil.com/"):  # fmt: skip
        assert rx.match(url), url
    assert not NetworkGuard([], allow_files=True).pattern.match("file:///x")
    with pytest.raises(ConfigError, match="allow-list host"):
        blocked_url_regex(["bad host/"])


def _alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.Error:
            pass
    return out


def _mentions(path: str) -> list[int]:
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        if p.info["status"] != psutil.STATUS_ZOMBIE and path in " ".join(p.info["cmdline"] or []):
            found.append(p.pid)
    return found


def _our_temp_dirs() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob(f"{PROFILE_PREFIX}{os.getpid()}-*")}


def test_killed_browser_raises_crashed_and_close_leaves_nothing(site, tmp_path):
    base, _, _ = site
    before = _our_temp_dirs()
    dev = BrowserEnv(
        None, BrowserOptions(share_browser=False, temp_dir=str(tmp_path), screenshot=False)
    )
    obs = dev.reset(_task(base, "/form.html"), seed=0)
    pids = dev.process_ids()[:-1]  # the Chromium tree (the last pid is the shared driver)
    assert len(pids) > 2 and any(tmp_path.iterdir()) and _mentions(str(tmp_path))
    os.kill(dev.browser_pid, signal.SIGKILL)
    with pytest.raises(DeviceCrashed, match="died"):
        dev.step(_tap(obs, _el(obs, "go")))
    with pytest.raises(DeviceCrashed):
        dev.reset(_task(base, "/form.html"), seed=0)
    dev.close()
    assert _alive(pids) == [] and _mentions(str(tmp_path)) == []
    assert list(tmp_path.iterdir()) == []  # profile and Chromium's temp files are gone
    assert _our_temp_dirs() == before


def test_hung_page_times_out_without_stopping_other_devices(env, site, tmp_path):
    base, _, _ = site
    dev = BrowserEnv(
        None, BrowserOptions(step_timeout_s=2, temp_dir=str(tmp_path), screenshot=False)
    )
    obs = dev.reset(_task(base, "/hang.html"), seed=0)
    t0 = time.monotonic()
    with pytest.raises(DeviceTimeout, match="longer than 2 s"):
        dev.step(_tap(obs, obs.elements[0]))
    assert time.monotonic() - t0 < 10
    with pytest.raises(DeviceCrashed, match="restart"):
        dev.step(Action.tap(0.5, 0.5))
    obs = env.reset(_task(base, "/form.html"), seed=0)  # the shared browser still serves others
    assert _el(obs, "go").text == "Go"
    dev.close()


def test_device_works_from_another_thread_and_close_is_clean(site, tmp_path):
    base, _, _ = site
    dev = BrowserEnv(None, BrowserOptions(share_browser=False, temp_dir=str(tmp_path)))
    results = []
    worker = threading.Thread(
        target=lambda: results.append(dev.reset(_task(base, "/form.html"), seed=0))
    )
    worker.start()
    worker.join()
    r = dev.step(_tap(results[0], _el(results[0], "name")))  # stepped from the main thread
    assert _el(r.observation, "name").focused
    pids = dev.process_ids()[:-1]
    dev.close()
    assert _alive(pids) == [] and list(tmp_path.iterdir()) == []


def test_bad_options_fail_in_one_line():
    with pytest.raises(ConfigError, match="browser: unknown viewport 'tablet'"):
        make("browser", viewport="tablet")
    with pytest.raises(ConfigError, match=r"browser\.image_format: 'gif' is not one of"):
        make("browser", image_format="gif")
    with pytest.raises(ConfigError, match=r"browser.jpeg_quality=0: must be in \[1, 100\]"):
        make("browser", jpeg_quality=0)
    with pytest.raises(ConfigError, match="browser executable"):
        BrowserEnv(None, BrowserOptions(executable="/no/such/chromium"))


_CHILD = """
import sys, time
from devicerl.envs.browser import BrowserEnv, BrowserOptions
options = BrowserOptions(share_browser=False, temp_dir=sys.argv[1], screenshot=False)
dev = BrowserEnv(None, options)
print(dev.browser_pid, flush=True)
if sys.argv[2] == "hang":
    time.sleep(60)
"""


@pytest.mark.parametrize("how", ["exit", "sigkill"])
def test_browser_dies_with_its_process(tmp_path, how):
    import subprocess
    import sys

    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tmp_path), "hang" if how == "sigkill" else "exit"],
        stdout=subprocess.PIPE,
        text=True,
    )
    pid = int(child.stdout.readline())
    if how == "sigkill":  # no chance to clean up: the parent-death signal kills Chromium
        child.kill()
    child.wait(timeout=30)
    deadline = time.monotonic() + 10
    while _alive([pid]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive([pid]) == []
    if how == "exit":  # atexit removed everything
        assert list(tmp_path.iterdir()) == []
    else:  # the next launch sweeps the folders of dead processes
        from devicerl.envs.browser.launcher import sweep_stale_profiles

        assert sweep_stale_profiles(tmp_path) >= 1 and list(tmp_path.iterdir()) == []


def _child_device(url: str, out) -> None:
    dev = BrowserEnv(None, BrowserOptions(screenshot=False))
    obs = dev.reset(Task("web/form", params={"url": url}), seed=0)
    out.put((dev.browser_pid, _el(obs, "go").text))
    dev.close()


def test_forked_worker_gets_its_own_browser(env, site):
    import multiprocessing as mp

    base, _, _ = site
    env.reset(_task(base, "/form.html"), seed=0)
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_child_device, args=(base + "/form.html", out))
    child.start()
    child_pid, text = out.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0 and text == "Go" and child_pid != env.browser_pid
    obs = env.reset(_task(base, "/form.html"), seed=0)  # the parent's device is untouched
    assert _el(obs, "go").text == "Go" and _alive([env.browser_pid])
