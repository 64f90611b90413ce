"""`AgentSpec`: a picklable, config-file friendly recipe for any agent.

Collectors in other processes receive the spec and build the policy there (weights then follow
through `Policy.set_weights`); YAML configs map onto it with `devicerl.config.load_config`.

    agent:
      kind: small   # small | autoui | vlm | api | random | uniform | uniform_clickable | oracle
      path: runs/x/agent     # a saved agent (small, autoui, vlm), an Auto-UI checkpoint dir or
                             # a transformers image-text-to-text model dir (vlm)
      init_from: runs/y/agent  # small: build from `small`, start from a saved agent's weights
      vision_dir: /models/blip2-vision
      temperature: null      # null: each agent's own (its saved config's, or its default)
      api: {chat: {base_url: http://127.0.0.1:8000/v1, model: my-vlm}}
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from devicerl.agents.api import APIAgentConfig
from devicerl.agents.base import Policy
from devicerl.agents.config import AGENT_SETTINGS, AutoUIOptions
from devicerl.agents.small.config import SmallAgentOptions
from devicerl.agents.vlm.config import VLMOptions
from devicerl.errors import ConfigError

log = logging.getLogger(__name__)

KINDS = ("small", "autoui", "vlm", "api", "random", "uniform", "uniform_clickable", "oracle")


def _readers(setting: str) -> str:
    """The agent kinds that read ``setting`` (as `AGENT_SETTINGS` lists them), for help texts."""
    return ", ".join(kind for kind, names in AGENT_SETTINGS.items() if setting in names)


@dataclass
class AgentSpec:
    """Which agent to build and how."""

    kind: str = field(default="small", metadata={"help": f"one of {', '.join(KINDS)}"})
    path: str | None = field(
        default=None,
        metadata={
            "help": "saved agent dir (small/autoui/vlm), Auto-UI checkpoint or VLM model dir"
        },
    )
    init_from: str | None = field(
        default=None,
        metadata={
            "help": "small: a saved agent whose weights start the one `small` describes; "
            "the parts it lacks (heads, pixel features) start fresh"
        },
    )
    vision_dir: str | None = field(
        default=None, metadata={"help": "local vision encoder dir (autoui)"}
    )
    device: str = field(default="cpu", metadata={"help": "cpu, cuda, cuda:1 or auto"})
    seed: int = field(
        default=0, metadata={"help": "seed of a new agent's weights and of random agents"}
    )
    temperature: float | None = field(
        default=None,
        metadata={
            "help": f"sampling temperature ({_readers('temperature')}; 0, greedy, for api only); "
            "null: the agent's own (its saved config's, else 1.0, api 0.0)",
            "min": 0,
        },
    )
    history: int | None = field(
        default=None,
        metadata={
            "help": f"previous actions in the prompt ({_readers('history')}); null: the "
            "agent's own (its saved config's, else 4)",
            "min": 0,
        },
    )
    include_elements: bool | None = field(
        default=None,
        metadata={
            "help": "list the UI elements as text in the prompt "
            f"({_readers('include_elements')}); null: the agent's own (its saved config's, "
            "else off for vlm, on for api)"
        },
    )
    small: SmallAgentOptions = field(default_factory=SmallAgentOptions)
    #: None: the saved agent's own adapters (none for a bare Auto-UI checkpoint); its decoding
    #: and input settings are the saved agent's (or the defaults of `AutoUIConfig`), but for
    #: ``temperature`` and ``history`` where set above.
    autoui: AutoUIOptions | None = None
    #: None: the saved agent's own options (or the defaults for a bare model folder).
    vlm: VLMOptions | None = None
    api: APIAgentConfig = field(default_factory=APIAgentConfig)

    def validate(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"agent.kind: {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.kind in ("autoui", "vlm") and self.path is None:
            raise ConfigError(f"agent.path: the {self.kind} agent needs a model directory")
        if self.init_from is not None and self.kind != "small":
            raise ConfigError(f"agent.init_from: only the small agent has it, not {self.kind!r}")
        if self.init_from is not None and self.path is not None:
            raise ConfigError(
                "agent.init_from and agent.path are both set: path runs a saved agent as it "
                "is, init_from builds `agent.small` from one; set the other to null"
            )
        read = AGENT_SETTINGS.get(self.kind, ())
        for name in ("temperature", "history", "include_elements"):
            if getattr(self, name) is not None and name not in read:
                raise ConfigError(
                    f"agent.{name}: the {self.kind} agent does not read it (set it to null)"
                )
        if self.temperature is not None and self.temperature <= 0 and self.kind != "api":
            raise ConfigError(
                f"agent.temperature={self.temperature}: must be > 0 for the {self.kind} agent "
                "(greedy decoding is the caller's choice)"
            )

    def settings(self) -> dict[str, Any]:
        """The agent-wide settings this spec sets (not null), by field name."""
        names = AGENT_SETTINGS.get(self.kind, ())
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}

    def make(self) -> Policy:
        """Build the policy (imports the heavy libraries only for the kind asked for)."""
        self.validate()
        if self.kind == "small":
            from devicerl.agents.small.agent import SmallAgent

            if self.path is not None:
                return SmallAgent.from_pretrained(
                    self.path, device=self.device, overrides=self.settings()
                )
            agent = SmallAgent(
                self.small.architecture(self.seed), device=self.device, **self.settings()
            )
            if self.init_from is not None:
                fresh = agent.load_matching(self.init_from)
                log.info(
                    "agent.init_from %s: %d weights loaded, %d start fresh",
                    self.init_from, len(agent.module.state_dict()) - len(fresh), len(fresh),
                )  # fmt: skip
            return agent
        if self.kind == "autoui":
            from devicerl.agents.autoui import AutoUIAgent

            assert self.path is not None
            return AutoUIAgent.from_pretrained(
                self.path,
                self.vision_dir,
                device=self.device,
                seed=self.seed,
                options=self.autoui,
                overrides=self.settings(),
            )
        if self.kind == "vlm":
            from devicerl.agents.vlm.agent import VLMAgent

            assert self.path is not None
            return VLMAgent.from_pretrained(
                self.path,
                device=self.device,
                seed=self.seed,
                options=self.vlm,
                overrides=self.settings(),
            )
        if self.kind == "api":
            from devicerl.agents.api import APIAgent

            return APIAgent(self.api, **self.settings())
        if self.kind == "oracle":
            from devicerl.agents.scripted import PlanOracle

            return PlanOracle()
        if self.kind in ("uniform", "uniform_clickable"):
            # uniform over what the small agent `small` can express (clickable: tapping only
            # elements flagged clickable, privileged DOM information the learners do not get)
            from devicerl.agents.small.uniform import UniformPolicy

            return UniformPolicy(
                self.small.architecture(self.seed),
                seed=self.seed,
                clickable_only=self.kind == "uniform_clickable",
            )
        from devicerl.agents.random import RandomPolicy

        return RandomPolicy(seed=self.seed)


def make_agent(spec: AgentSpec | str, **kwargs) -> Policy:
    """``make_agent("small")``, ``make_agent("autoui", path=..., vision_dir=...)`` or a spec."""
    if isinstance(spec, str):
        spec = AgentSpec(kind=spec, **kwargs)
    return spec.make()
