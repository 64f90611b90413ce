"""Taps written in a model's own coordinates land on the element it means, in real headless
Chromium at three viewport sizes.

A model sees the screenshot as its processor resized it. Here the resize is the real Qwen2.5-VL
image processor's (its defaults, and a smaller pixel budget that shrinks the screen), read from
the processor's own output (its patch grid), not from devicerl's code. The target is found where
the model would see it, in the resized image, and written the way each family's published
convention says (pixels of that image, a 0-1000 or 0-999 grid, [0, 1] decimals); the codec reads
that text through the geometry devicerl computes before the processor runs, and the device taps
the result. Every tap must hit the button; the page counts hits and misses."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from devicerl.agents.vlm.geometry import processor_geometry
from devicerl.codecs import make_codec
from devicerl.envs import make
from devicerl.tasks import resolve

pytestmark = pytest.mark.browser

VIEWPORTS = [(360, 740), (800, 600), (1280, 800)]
PATCH = 14
PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>
html, body { margin: 0; height: 100%; background: #fff; }
#target { position: absolute; left: 61%; top: 37%; width: 40px; height: 28px; border: 0;
          background: #f00; color: #f00; font: 9px sans-serif; }
</style></head><body>
<button id="target">hits 0</button>
<script>
  window.hits = 0; window.misses = 0;
  document.addEventListener("click", (e) => {
    if (e.target.id === "target") { window.hits += 1; } else { window.misses += 1; }
    document.getElementById("target").textContent = `hits ${window.hits} misses ${window.misses}`;
  });
</script></body></html>"""

#: How each family writes a tap at image pixel (x, y) of a (w, h) image, from its published
#: examples: the model's text, written here without devicerl's codecs.
WRITTEN = {
    "mobile_use": lambda x, y, w, h: (
        '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "click", "coordinate": '
        f"[{round(x)}, {round(y)}]}}}}\n</tool_call>"
    ),
    "mobile_use_qwen3": lambda x, y, w, h: (
        '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "click", "coordinate": '
        f"[{round(x / w * 999)}, {round(y / h * 999)}]}}}}\n</tool_call>"
    ),
    "ui_tars": lambda x, y, w, h: (
        f"Action: click(start_box='<|box_start|>({round(x / w * 1000)},{round(y / h * 1000)})"
        "<|box_end|>')"
    ),
    "ui_tars_1_5": lambda x, y, w, h: f"Action: click(start_box='({round(x)},{round(y)})')",
    "aguvis": lambda x, y, w, h: f"pyautogui.click(x={x / w:.4f}, y={y / h:.4f})",
    "json": lambda x, y, w, h: f'{{"type": "DUAL_POINT", "touch": [{x / w:.3f}, {y / h:.3f}]}}',
}


def _processors():
    from transformers.models.qwen2_vl import Qwen2VLImageProcessorPil

    defaults = Qwen2VLImageProcessorPil(min_pixels=3136, max_pixels=12845056, patch_size=PATCH,
                                        merge_size=2)  # fmt: skip
    tight = Qwen2VLImageProcessorPil(min_pixels=3136, max_pixels=100_000, patch_size=PATCH,
                                     merge_size=2)  # fmt: skip
    return [defaults, tight]


def _seen(processor, shot: np.ndarray) -> np.ndarray:
    """The screenshot as the processor shows it to the model: resized to its patch grid."""
    image = Image.fromarray(shot)
    grid = processor(images=[image], return_tensors="pt")["image_grid_thw"][0]
    size = (int(grid[2]) * PATCH, int(grid[1]) * PATCH)
    return np.asarray(image.resize(size, Image.Resampling.BICUBIC))


def test_taps_in_each_familys_coordinates_land_on_the_target(tmp_path) -> None:
    (tmp_path / "page.html").write_text(PAGE)
    (tmp_path / "suite.yaml").write_text(
        "suite: landing\ntasks:\n  - {name: tap, page: page.html, success: 'false', "
        "max_steps: 200}\n"
    )
    (task,) = resolve(str(tmp_path / "suite.yaml"))
    for viewport in VIEWPORTS:
        env = make("browser", viewport=viewport, settle_ms=0, image_format="png")
        try:
            obs = env.reset(task, seed=0)
            taps, shot = 0, obs.screenshot
            assert shot is not None and shot.shape[:2] == viewport[::-1]
            for processor in _processors():
                seen = _seen(processor, shot)
                h, w = seen.shape[:2]
                red = (seen[..., 0] > 200) & (seen[..., 1] < 60) & (seen[..., 2] < 60)
                ys, xs = np.nonzero(red)
                x, y = xs.mean() + 0.5, ys.mean() + 0.5  # the button's centre, image pixels
                geometry = processor_geometry(processor, shot.shape[1], shot.shape[0])
                assert geometry.size == (w, h)
                for name, write in WRITTEN.items():
                    action = make_codec(name).parse(write(x, y, w, h), geometry)
                    assert action.is_tap, (name, action)
                    obs = env.step(action).observation
                    taps += 1
                    label = next(e.text for e in obs.elements if e.text.startswith("hits"))
                    assert label == f"hits {taps} misses 0", (viewport, name, w, h, action)
        finally:
            env.close()
