"""Android observation costs on the host side, over a real adb smart-socket link on loopback.

A fake adb server (`devicerl.testing.fake_adb`) serves UI-like frames (text rows and
photo thumbnails, so PNG sizes resemble real screens) to adbutils, side by side:

Part 1 (screenshots): per observation, request + transfer + decode to H x W x 3 uint8, for
- ``png``: devicerl's ``exec:screencap -p`` + PIL decode;
- ``raw``: devicerl's ``exec:screencap`` (raw frame) + numpy reshape;
- ``adbutils``: adbutils' own ``AdbDevice.screenshot()`` (``shell:screencap -p``, PIL).
Bytes per frame are reported too, and the host's time to PNG-encode a frame (zlib level 6, as
screencap does) as a rough proxy for the device-side cost that ``raw`` avoids (a phone's CPU is
slower than this machine's; the fake server serves pre-encoded PNGs, so ``png`` excludes it).

Part 2 (commands): round trip of ``input tap`` with devicerl's client (server version cached: one
connection per command) vs adbutils' stock client (asks ``host:version`` before every command).

Part 3 (UI elements): parsing a uiautomator dump of a busy screen (200 nodes).

    python benchmarks/android_screens.py [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

import adbutils
import numpy as np
from PIL import Image
from pool_throughput import write_report
from store_codec import _photo, ui_frame

from devicerl.envs.android.adb import AdbLink
from devicerl.envs.android.screen import decode
from devicerl.envs.android.uiautomator import parse_hierarchy
from devicerl.testing.fake_adb import FakeAdbServer, FakeDevice, FakeScreen

SIZES = {"1080x2400": (1080, 2400), "540x1200": (540, 1200)}


def _timed(fn, reps: int) -> tuple[float, object]:
    """Median seconds of ``fn()`` over ``reps`` calls (after one warm-up) and its last result."""
    out = fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def _png6(frame: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format="PNG", compress_level=6)
    return buf.getvalue()


def _dump(width: int, height: int, n: int) -> str:
    rows = []
    for i in range(n):
        top = (i * 37) % (height - 60)
        rows.append(
            f'<node index="{i}" text="Item {i}" resource-id="com.example:id/row{i}" '
            f'class="android.widget.TextView" package="com.example" content-desc="" '
            f'clickable="{str(i % 3 == 0).lower()}" focused="false" scrollable="false" '
            f'visible-to-user="true" bounds="[0,{top}][{width},{top + 60}]" />'
        )
    return f'<?xml version="1.0"?><hierarchy rotation="0">{"".join(rows)}</hierarchy>'


def screenshots(size: tuple[int, int], reps: int) -> dict:
    frame = ui_frame(*size, seed=0, photo=_photo())
    dev = FakeDevice("emulator-5554", [FakeScreen(frame, _png=_png6(frame))])
    row: dict = {"size": f"{size[0]}x{size[1]}"}
    with FakeAdbServer([dev]) as srv:
        link = AdbLink("127.0.0.1", srv.port, dev.serial, 30.0)
        stock = adbutils.AdbClient("127.0.0.1", srv.port).device(dev.serial)
        systems = {
            "png": lambda: decode(link.exec_out("screencap -p"), "png"),
            "raw": lambda: decode(link.exec_out("screencap"), "raw"),
            "adbutils": lambda: np.asarray(stock.screenshot()),
        }
        for name, fn in systems.items():
            seconds, image = _timed(fn, reps)
            assert np.array_equal(image, frame), f"{name} returned a different frame"
            row[f"{name}_ms"] = seconds * 1e3
        row["png_bytes"] = len(dev.screens[0].png)
        row["raw_bytes"] = len(dev.screens[0].raw())
        row["png_encode_ms_host"] = _timed(lambda: _png6(frame), max(3, reps // 4))[0] * 1e3
    row["raw_vs_png"] = row["png_ms"] / row["raw_ms"]
    row["png_vs_adbutils"] = row["adbutils_ms"] / row["png_ms"]
    return row


def commands(reps: int) -> dict:
    dev = FakeDevice("emulator-5554", [FakeScreen(np.zeros((8, 8, 3), np.uint8))])
    with FakeAdbServer([dev]) as srv:
        link = AdbLink("127.0.0.1", srv.port, dev.serial, 30.0)
        stock = adbutils.AdbClient("127.0.0.1", srv.port).device(dev.serial)
        ours, _ = _timed(lambda: link.shell("input tap 540 1200"), reps)
        theirs, _ = _timed(lambda: stock.shell("input tap 540 1200", encoding=None), reps)
    return {"devicerl_ms": ours * 1e3, "adbutils_ms": theirs * 1e3, "ratio": theirs / ours}


def ui_parse(reps: int) -> dict:
    xml = _dump(1080, 2400, 200)
    seconds, els = _timed(lambda: parse_hierarchy(xml, (1080, 2400)), reps)
    return {"nodes": 200, "elements": len(els), "parse_ms": seconds * 1e3, "xml_bytes": len(xml)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions, one screen size")
    ap.add_argument("--json", type=Path, default=None, help="write results to this JSON file")
    args = ap.parse_args()
    t0 = time.perf_counter()
    reps = 5 if args.quick else 20
    sizes = ["1080x2400"] if args.quick else list(SIZES)
    rows = [screenshots(SIZES[s], reps) for s in sizes]
    for r in rows:
        print(
            f"{r['size']:>10}: png {r['png_ms']:6.1f} ms ({r['png_bytes'] / 1e6:.2f} MB) | "
            f"raw {r['raw_ms']:6.1f} ms ({r['raw_bytes'] / 1e6:.2f} MB) | adbutils "
            f"{r['adbutils_ms']:6.1f} ms | host PNG encode {r['png_encode_ms_host']:6.1f} ms | "
            f"png/raw {r['raw_vs_png']:.2f}x, adbutils/png {r['png_vs_adbutils']:.2f}x"
        )
    cmd = commands(reps * 10)
    print(
        f"input tap round trip: devicerl {cmd['devicerl_ms']:.2f} ms vs adbutils "
        f"{cmd['adbutils_ms']:.2f} ms ({cmd['ratio']:.2f}x)"
    )
    ui = ui_parse(reps)
    print(f"uiautomator parse: {ui['parse_ms']:.2f} ms for {ui['nodes']} nodes")
    summary = {
        "raw_vs_png_1080x2400": rows[0]["raw_vs_png"],
        "png_vs_adbutils_1080x2400": rows[0]["png_vs_adbutils"],
        "command_vs_adbutils": cmd["ratio"],
    }
    if args.json:
        report = {"screenshots": rows, "commands": cmd, "ui": ui, "summary": summary}
        write_report(args.json, "android_screens", args.quick, report, t0)
    print(f"total {time.perf_counter() - t0:.1f}s")
    print("RESULT " + " ".join(f"{k}={v:.3f}" for k, v in summary.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
