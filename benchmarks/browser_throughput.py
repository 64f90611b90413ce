"""Env-steps/s of our MiniWoB++ browser devices vs the official ``miniwob`` env, side by side.

Both sides run N = 1, 2, 4, 8 devices, each stepped from its own thread (device i runs task i
of the ``miniwob-dev`` split; every step is a click at a random point of the task area, episodes
reset when they end, so the workload is the same on both sides). Systems:

- ``ours``: the configuration we recommend (the defaults): one thread per device, all devices
  of the process sharing one Playwright driver (the process's `BrowserHub`) and one Chromium
  (one browser context each), screenshots through CDP JPEG;
- ``ours-dom``: the same without screenshots (agents that read only the elements);
- ``official``: ``gym.make("miniwob/<task>-v1")`` (Selenium + ChromeDriver, one Chrome per env,
  PNG screenshots, DOM through its own script), stepped from threads.

It first times the screenshot paths on one device (Playwright's ``page.screenshot`` vs raw
CDP ``Page.captureScreenshot``, PNG vs JPEG, decode included). Memory per device is the PSS of
the browser-side processes (Chromium trees, Playwright driver / ChromeDrivers) with all 8
devices alive, divided by 8; the Python process itself is not counted for either side.

    python benchmarks/browser_throughput.py [--quick] [--seconds 8] [--json out.json]

The last line is ``RESULT steps_per_s=X vs_official=Y`` (ours at its best N, over the official
env at its best N).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import queue
import random
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devicerl.actions import Action
from devicerl.tasks import resolve

TASKS = [t.short_name for t in resolve("miniwob-dev")]


def _pss_mib(pids: list[int]) -> float:
    import psutil

    total = 0
    for pid in set(pids):
        with contextlib.suppress(psutil.Error):
            total += psutil.Process(pid).memory_full_info().pss
    return total / 2**20


class Worker(threading.Thread):
    """Owns one device in its own thread; runs timed stepping windows on request."""

    def __init__(self, index: int, system: str) -> None:
        super().__init__(daemon=True, name=f"bench-{system}-{index}")
        self.index, self.system = index, system
        self.task = TASKS[index % len(TASKS)]
        self.commands: queue.Queue = queue.Queue()
        self.results: queue.Queue = queue.Queue()
        self.pids: Callable[[], list[int]] = list
        self.start()

    def run(self) -> None:
        try:
            if self.system == "official":
                self._run_official()
            else:
                self._run_ours()
        except Exception as e:  # surface errors to the main thread
            self.results.put(e)

    def _loop(
        self,
        reset: Callable[[int], None],
        step: Callable[[float, float], bool],
        set_mode: Callable[[str], None] = lambda mode: None,
    ) -> None:
        rng = random.Random(self.index)
        seed = self.index * 100_000
        reset(seed)
        self.results.put("ready")
        while True:
            cmd = self.commands.get()
            if cmd is None:
                return
            mode, start, stop = cmd
            set_mode(mode)
            while time.perf_counter() < start:
                time.sleep(0.001)
            steps = 0
            while time.perf_counter() < stop:
                if step(rng.uniform(0.02, 0.98), rng.uniform(0.25, 0.98)):
                    seed += 1
                    reset(seed)
                steps += 1
            self.results.put(steps)

    def _run_ours(self) -> None:
        from devicerl.envs import make

        env = make(f"miniwob/{self.task}", max_steps=10**9)
        self.pids = env.process_ids

        def set_mode(mode: str) -> None:
            env.screenshot = mode == "ours"

        try:
            self._loop(
                lambda seed: env.reset(seed=seed),
                lambda x, y: env.step(Action.tap(x, y)).done,
                set_mode,
            )
        finally:
            env.close()

    def _run_official(self) -> None:
        from miniwob.action import ActionTypes
        from miniwob_harness.official import official_env, official_processes

        with official_env(self.task) as env:
            self.pids = lambda: official_processes(env)
            make = env.unwrapped.create_action

            def step(x: float, y: float) -> bool:
                action = make(ActionTypes.CLICK_COORDS, coords=[x * 160, y * 210])
                return bool(env.step(action)[2])

            self._loop(lambda seed: env.reset(seed=seed), step)


def bench_capture(n: int, task: str, fast_frames: bool = True) -> list[dict[str, Any]]:
    """Milliseconds per screenshot (capture + decode to an array) by path, on one device."""
    import base64
    import io

    import numpy as np
    from PIL import Image

    from devicerl.envs import make

    env = make(f"miniwob/{task}", max_steps=10**9, fast_frames=fast_frames, share_browser=False)
    env.reset(seed=0)
    page, cdp, run = env._page, env._cdp, env._hub.run  # measuring the device's internals
    w, h = env.screen_size
    clip = {"x": 0, "y": 0, "width": w, "height": h}

    async def playwright(kind: str) -> bytes:
        return await page.screenshot(
            type=kind, clip=clip, **({"quality": 90} if kind == "jpeg" else {})
        )

    async def raw_cdp(kind: str) -> bytes:
        params = {"format": kind, "clip": {**clip, "scale": 1}, "optimizeForSpeed": True}
        if kind == "jpeg":
            params["quality"] = 90
        return base64.b64decode((await cdp.send("Page.captureScreenshot", params))["data"])

    paths = [("playwright page.screenshot PNG", playwright, "png"),
             ("playwright page.screenshot JPEG", playwright, "jpeg"),
             ("CDP Page.captureScreenshot PNG", raw_cdp, "png"),
             ("CDP Page.captureScreenshot JPEG", raw_cdp, "jpeg")]  # fmt: skip
    if not fast_frames:
        paths = [(f"{paths[-1][0]}, no fast-frame flags", raw_cdp, "jpeg")]
    rows = []
    try:
        for name, fn, kind in paths:
            total = 0.0
            for i in range(n + 2):
                env.step(Action.tap(0.9, 0.1 + 0.001 * i))  # new frame content each time
                t0 = time.perf_counter()
                with Image.open(io.BytesIO(run(fn(kind)))) as img:
                    np.asarray(img.convert("RGB"))
                total += (time.perf_counter() - t0) if i >= 2 else 0.0
            rows.append({"path": name, "size": f"{w}x{h}", "ms": 1000 * total / n})
            print(f"capture  {w}x{h} {name:34s} {rows[-1]['ms']:6.1f} ms (incl. decode)",
                  flush=True)  # fmt: skip
    finally:
        env.close()
    return rows


def bench_system(system: str, modes: list[str], counts: list[int], seconds: float) -> list[dict]:
    """Step ``system``'s devices (``ours`` or ``official``) in each mode and device count."""
    t0 = time.perf_counter()
    workers = [Worker(i, system) for i in range(max(counts))]
    for w in workers:
        got = w.results.get(timeout=120)
        if isinstance(got, Exception):
            raise got
    print(f"{system:9s} {len(workers)} devices ready in {time.perf_counter() - t0:.1f} s")
    rows = []
    for mode in modes:
        for n in counts:
            start = time.perf_counter() + 0.2
            for w in workers[:n]:
                w.commands.put((mode, start, start + seconds))
            steps = [w.results.get(timeout=seconds + 120) for w in workers[:n]]
            for s in steps:
                if isinstance(s, Exception):
                    raise s
            rate = sum(steps) / seconds
            rows.append({"system": mode, "devices": n, "steps_per_s": rate,
                         "step_ms": 1000 * n / max(rate, 1e-9)})  # fmt: skip
            print(f"{mode:9s} N={n}  {rate:7.1f} steps/s  {rows[-1]['step_ms']:6.1f} "
                  "ms/step/device", flush=True)  # fmt: skip
    # Memory with every device alive (a shared Chromium is counted once, spread over all).
    mem = _pss_mib([p for w in workers for p in w.pids()]) / len(workers)
    for r in rows:
        r["pss_mib_per_device"] = mem
    print(f"{system:9s} memory: {mem:.0f} MiB PSS per device with {len(workers)} devices")
    for w in workers:
        w.commands.put(None)
    for w in workers:
        w.join(timeout=60)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--devices", default="1,2,4,8", help="device counts to try")
    p.add_argument("--seconds", type=float, default=8.0, help="stepping window per count")
    p.add_argument("--systems", default="capture,ours,ours-dom,official")
    p.add_argument("--quick", action="store_true", help="short windows (whole run < 1 min)")
    p.add_argument("--json", default=None, help="write the results here")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)  # the official env warns on every late step
    counts = sorted({int(c) for c in args.devices.split(",")})
    seconds = 1.5 if args.quick else args.seconds
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    print(f"{os.cpu_count()} CPUs; tasks: {', '.join(TASKS[: max(counts)])}; {seconds:g} s/window")
    capture = []
    if "capture" in systems:
        n = 10 if args.quick else 40
        for task in ("click-test-2", "flight.AA"):  # 160x210 and 375x667 screens
            capture += bench_capture(n, task)
        capture += bench_capture(n, "click-test-2", fast_frames=False)
    rows = []
    ours_modes = [s for s in systems if s in ("ours", "ours-dom")]
    if ours_modes:
        rows += bench_system("ours", ours_modes, counts, seconds)
    if "official" in systems:
        rows += bench_system("official", ["official"], counts, seconds)

    def best(system: str) -> dict[str, Any] | None:
        mine = [r for r in rows if r["system"] == system]
        return max(mine, key=lambda r: r["steps_per_s"]) if mine else None

    summary: dict[str, Any] = {"rows": rows, "capture": capture, "seconds": seconds,
                               "tasks": TASKS}  # fmt: skip
    systems = [s for s in systems if s != "capture"]
    for s in systems:
        b = best(s)
        summary[f"best_{s}"] = b
        if b:
            print(f"best {s}: {b['steps_per_s']:.1f} steps/s at N={b['devices']}")
    ours, official = best("ours"), best("official")
    ratio = ours["steps_per_s"] / official["steps_per_s"] if ours and official else float("nan")
    if ours and official:
        for s in systems:
            b = best(s)
            if b and s != "official":
                print(f"{s} / official = {b['steps_per_s'] / official['steps_per_s']:.2f}x")
    summary["vs_official"] = ratio
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))
    ours_rate = ours["steps_per_s"] if ours else float("nan")
    print(f"RESULT steps_per_s={ours_rate:.1f} vs_official={ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
