"""A held press in Chromium: the pointer (or finger) goes down, stays, then comes up.

Playwright has a held mouse button (``mouse.down`` / ``mouse.up``) but only a touch *tap*; a
held finger on a touch viewport is sent as CDP ``Input.dispatchTouchEvent`` touchStart and
touchEnd, which is what a phone's long press is (pointer events of type ``touch``, then the
page's ``contextmenu`` where the page did not prevent it). The wait between is an asyncio
sleep on the hub's loop, so other devices keep stepping meanwhile.
"""

from __future__ import annotations

import asyncio
from typing import Any


async def hold(page: Any, cdp: Any, touch: bool, x: float, y: float, seconds: float) -> None:
    """Press at (x, y) CSS pixels for ``seconds``, with a finger when ``touch``."""
    if touch:
        point = {"x": x, "y": y}
        await cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [point]})
        await asyncio.sleep(seconds)
        await cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
        return
    await page.mouse.move(x, y)
    await page.mouse.down()
    await asyncio.sleep(seconds)
    await page.mouse.up()
