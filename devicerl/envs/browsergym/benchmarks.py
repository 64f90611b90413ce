"""What each BrowserGym benchmark needs to run, and how AgentLab runs it.

Facts read from ServiceNow/BrowserGym at commit 9e779f087de9a65668b6974d11f9ce9816026e96:
``browsergym/experiments/.../benchmark/configs.py`` (each benchmark's action subsets and step
budget, as AgentLab evaluates it), ``browsergym/webarena/.../instance.py`` and
``browsergym/visualwebarena/.../instance.py`` (the ``WA_*`` / ``VWA_*`` variables their task
setup asserts), WorkArena's README (``SNOW_INSTANCE_*``, or a Hugging Face token for its
managed instance pool). A device refuses a task whose variables are missing in one line,
before anything starts (`missing`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from devicerl.errors import ConfigError


@dataclass(frozen=True)
class Benchmark:
    """One BrowserGym benchmark (the ``<benchmark>`` of ``browsergym/<benchmark>.<task>``)."""

    name: str
    #: The package that registers its tasks (install it into BrowserGym's environment).
    package: str
    #: AgentLab's action subsets for it (``HighLevelActionSet(subsets=...)``).
    action_subsets: tuple[str, ...]
    #: AgentLab's step budget.
    max_steps: int
    #: Environment variables that must all be set (the benchmark's servers).
    variables: tuple[str, ...] = ()
    #: Alternatively (when not empty), any one of these suffices instead of ``variables``.
    instead: tuple[str, ...] = ()
    #: What else it needs, in words.
    note: str = ""

    def missing(self) -> list[str]:
        """The variables still to set ([] when it can run)."""
        if self.instead and any(os.environ.get(v) for v in self.instead):
            return []
        return [v for v in self.variables if not os.environ.get(v)]

    def needs(self) -> str:
        """One line: what it needs to run."""
        parts = [f"package {self.package}"]
        if self.variables:
            alt = f" (or {' / '.join(self.instead)})" if self.instead else ""
            parts.append("variables " + ", ".join(self.variables) + alt)
        if self.note:
            parts.append(self.note)
        return "; ".join(parts)


#: The action subsets of a task no benchmark owns (``openended``): elements, coordinates,
#: navigation, tabs, chat and infeasibility.
OPEN_SUBSETS = ("chat", "infeas", "bid", "coord", "nav", "tab")

BENCHMARKS: dict[str, Benchmark] = {
    b.name: b
    for b in (
        Benchmark(
            "miniwob", "browsergym-miniwob", ("miniwob_all",), 10,
            note="runs offline from the HTML the miniwob package ships",
        ),
        Benchmark(
            "openended", "browsergym-core", OPEN_SUBSETS, 30,
            note="task params task_kwargs: {start_url, goal}",
        ),
        Benchmark(
            "webarena", "browsergym-webarena", ("webarena",), 30,
            variables=tuple(f"WA_{k}" for k in (
                "SHOPPING", "SHOPPING_ADMIN", "REDDIT", "GITLAB", "WIKIPEDIA", "MAP", "HOMEPAGE",
            )),
            note="self-hosted WebArena sites; OPENAI_API_KEY for its fuzzy-match evaluations",
        ),
        Benchmark(
            "visualwebarena", "browsergym-visualwebarena", ("visualwebarena",), 30,
            variables=tuple(f"VWA_{k}" for k in (
                "SHOPPING", "REDDIT", "WIKIPEDIA", "HOMEPAGE", "CLASSIFIEDS",
                "CLASSIFIEDS_RESET_TOKEN",
            )),
            note="self-hosted VisualWebArena sites",
        ),
        Benchmark(
            "workarena", "browsergym-workarena", ("workarena",), 15,
            variables=("SNOW_INSTANCE_URL", "SNOW_INSTANCE_UNAME", "SNOW_INSTANCE_PWD"),
            instead=("HUGGING_FACE_HUB_TOKEN",),
            note="a ServiceNow instance",
        ),
        Benchmark(
            "assistantbench", "browsergym-assistantbench", ("assistantbench",), 30,
            note="the open web",
        ),
    )
}  # fmt: skip


def benchmark_of(task_name: str) -> Benchmark:
    """The benchmark of ``browsergym/<benchmark>.<task>`` (or ``browsergym/openended``)."""
    if not task_name.startswith("browsergym/"):
        raise ConfigError(f"{task_name!r} is not a BrowserGym task (browsergym/<benchmark>...)")
    key = task_name.split("/", 1)[1].split(".", 1)[0]
    if key not in BENCHMARKS:
        raise ConfigError(
            f"unknown BrowserGym benchmark {key!r} in {task_name!r}; known: {', '.join(BENCHMARKS)}"
        )
    return BENCHMARKS[key]
