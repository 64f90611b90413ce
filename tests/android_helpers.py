"""Recorded screens for the Android tests: generated frames and matching uiautomator dumps."""

from __future__ import annotations

import time

import numpy as np

from devicerl.testing.fake_adb import FakeDevice, FakeScreen

#: Background colours of the generated screens (screen k uses COLOURS[k % len]).
COLOURS = [(240, 240, 240), (25, 118, 210), (60, 180, 75), (230, 25, 75)]


def node(cls: str, bounds: tuple[int, int, int, int], **attrs: str) -> str:
    """One uiautomator ``<node>`` (attributes use their XML names: pass content_desc etc.)."""
    left, top, right, bottom = bounds
    xml_attrs = {
        "index": "0",
        "text": "",
        "resource-id": "",
        "class": cls,
        "package": "com.example.app",
        "content-desc": "",
        "checkable": "false",
        "clickable": "false",
        "enabled": "true",
        "focusable": "false",
        "focused": "false",
        "scrollable": "false",
        "long-clickable": "false",
        "password": "false",
        "selected": "false",
        "visible-to-user": "true",
        "bounds": f"[{left},{top}][{right},{bottom}]",
    }
    xml_attrs.update({k.replace("_", "-"): v for k, v in attrs.items()})
    body = " ".join(f'{k}="{v}"' for k, v in xml_attrs.items())
    return f"<node {body} />"


def hierarchy(width: int, height: int, nodes: list[str], rotation: int = 0) -> str:
    root = node("android.widget.FrameLayout", (0, 0, width, height)).replace(" />", ">")
    return (
        "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>"
        f'<hierarchy rotation="{rotation}">{root}{"".join(nodes)}</node></hierarchy>'
    )


def screen(k: int, width: int = 270, height: int = 600) -> FakeScreen:
    """Screen ``k``: a coloured background, a dark title bar, a white button with its dump."""
    img = np.zeros((height, width, 3), np.uint8)
    img[:] = COLOURS[k % len(COLOURS)]
    img[: height // 10] = (33, 33, 33)
    bx0, by0, bx1, by1 = width // 4, height // 2, 3 * width // 4, height // 2 + height // 10
    img[by0:by1, bx0:bx1] = 255
    img[0, 0] = (k, k, k)  # frames differ even when colours repeat
    nodes = [
        node("android.widget.TextView", (0, 0, width, height // 10), text=f"Screen {k}"),
        node(
            "android.widget.Button",
            (bx0, by0, bx1, by1),
            text="Next",
            clickable="true",
            resource_id="com.example.app:id/next",
        ),
    ]
    return FakeScreen(img, hierarchy(width, height, nodes))


def device(serial: str = "emulator-5554", n_screens: int = 3, **kw) -> FakeDevice:
    size = kw.pop("size", (270, 600))
    return FakeDevice(serial, [screen(k, *size) for k in range(n_screens)], **kw)


def connected_serial(env) -> str | None:
    """The serial of the device an `AndroidEnv` uses (None before its first reset or after a
    failure)."""
    return env._link.serial if env._link is not None else None


def env_kwargs(port: int, **kw) -> dict:
    """Options for a fast test device on the fake server at ``port``."""
    base = {"adb_port": port, "step_settle_s": 0.0, "reset_settle_s": 0.0}
    return {**base, **kw}


def drive(pool, until, act, on_first=None, limit_s: float = 30.0) -> list:
    """Step ``pool`` with ``act`` (observation -> action) until ``until(trajectories)`` holds;
    ``on_first`` sees each episode's first ready result before it is answered."""
    out: list = []
    deadline = time.monotonic() + limit_s
    while not until(out):
        assert time.monotonic() < deadline, f"stuck: {pool.stats()}"
        ready = pool.recv(min_ready=1, timeout=0.5)
        out += [r.trajectory for r in ready if r.trajectory is not None]
        live = [r for r in ready if r.observation is not None]
        for r in live:
            if r.first and on_first is not None:
                on_first(r)
        pool.send([act(r.observation) for r in live], [r.env_id for r in live])
    return out
