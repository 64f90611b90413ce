"""Which app an OPEN_APP action opens: the launcher's apps, as the phone itself lists them.

The device asks the phone for every activity its launcher shows (`LAUNCHER_QUERY`: ``cmd
package query-activities --components`` for the MAIN / LAUNCHER intent, one
``package/activity`` per line) once per connection and keeps the answer as an `AppCatalog`.
An app is opened with ``am start -n package/activity``.

Android does not tell a shell which label the launcher draws under an icon, so a name is
matched against package names, which hold it in most cases: the name's words (``Simple
Calendar Pro``: simple, calendar, pro) must each occur in a distinctive part of the package
(``com.simplemobiletools.calendar.pro``; the parts every package has, such as ``com`` or
``android``, do not count). When several packages match, the one with the fewest parts the name
leaves unexplained wins (``Calendar`` opens ``com.google.android.calendar`` rather than
``com.simplemobiletools.calendar.pro``), then the shorter name. A full package name matches
itself, and `ALIASES` names the few common apps whose package does not contain their name
(Gmail is ``com.google.android.gm``). AndroidWorld solves the same problem with a fixed table
of names per activity; reading the phone keeps this working for any installed app.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

LAUNCHER_QUERY = (
    "cmd package query-activities --components "
    "-a android.intent.action.MAIN -c android.intent.category.LAUNCHER"
)
#: App names whose words are not in their package name -> the package.
ALIASES = {
    "gmail": "com.google.android.gm",
    "phone": "com.google.android.dialer",
    "messages": "com.google.android.apps.messaging",
    "files": "com.google.android.documentsui",
    "play store": "com.android.vending",
    "google play": "com.android.vending",
}
#: Package-name parts that say nothing about which app it is.
GENERIC_PARTS = frozenset(
    {"com", "org", "net", "io", "de", "me", "co", "android", "google", "apps", "app", "www"}
)
_COMPONENT = re.compile(r"^\s*([A-Za-z]\w*(?:\.\w+)+)/([\w.$]+)\s*$")
#: How many packages an error message lists.
LISTED = 12


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


@dataclass(frozen=True)
class AppCatalog:
    """The phone's launchable apps: package -> the ``package/activity`` to start."""

    components: dict[str, str]

    @classmethod
    def parse(cls, output: str) -> AppCatalog:
        """From `LAUNCHER_QUERY`'s output (its ``--brief`` form reads the same); the first
        launcher activity of a package is the one started."""
        components: dict[str, str] = {}
        for line in output.splitlines():
            m = _COMPONENT.match(line)
            if m:
                components.setdefault(m.group(1), f"{m.group(1)}/{m.group(2)}")
        return cls(components)

    def resolve(self, name: str) -> tuple[str | None, str]:
        """The component ``name`` opens and "", or None and why nothing matches."""
        key = " ".join(_words(name))
        package = ALIASES.get(key)
        if name.strip() in self.components:
            return self.components[name.strip()], ""
        if package in self.components:
            return self.components[package], ""
        scored = [(s, p) for p in self.components if (s := _unexplained(key.split(), p)) >= 0]
        if scored:
            best = min(scored, key=lambda sp: (sp[0], len(sp[1]), sp[1]))[1]
            return self.components[best], ""
        listed = ", ".join(sorted(self.components)[:LISTED]) or "none"
        more = len(self.components) - LISTED
        return None, (
            f"open_app: no launchable app on the phone matches {name!r} (apps: {listed}"
            + (f" and {more} more)" if more > 0 else ")")
        )


def _unexplained(words: list[str], package: str) -> int:
    """How many distinctive parts of ``package`` none of ``words`` occurs in; -1 when a word
    occurs in none of them (the package does not match)."""
    parts = [p for p in _words(package) if p not in GENERIC_PARTS]
    if not words or not parts:
        return -1
    used = set()
    for w in words:
        hits = [i for i, p in enumerate(parts) if w in p]
        if not hits:
            return -1
        used.update(hits)
    return len(parts) - len(used)


def launch_command(component: str) -> str:
    """The shell command that starts ``component`` (``package/activity``)."""
    return f"am start -n {shlex.quote(component)}"
