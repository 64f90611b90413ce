"""The options of a ``browsergym`` device (`devicerl.envs.browsergym.env.BrowserGymEnv`), read
by the config loader like every device's (``env.options`` of a run)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class BrowserGymOptions:
    """Options of a ``browsergym`` device."""

    #: BrowserGym's environment (None: the cached one ``devicerl env browsergym`` built).
    python: str | None = field(default=None, metadata={"help": "BrowserGym's interpreter"})
    #: The Chromium executable (None: the system's, as the browser device finds it).
    chromium: str | None = field(default=None, metadata={"help": "Chromium executable"})
    #: Where MiniWoB++'s task pages are (``MINIWOB_URL``; set by ``make("browsergym/...")``).
    miniwob_url: str | None = field(default=None, metadata={"help": "MiniWoB++ pages' URL"})
