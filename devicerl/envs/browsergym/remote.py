"""The foreign side of a BrowserGym device: runs in BrowserGym's own environment.

Loaded by `devicerl.envs.foreign.remote` by file path inside the environment that has
``browsergym-core`` (it pins ``playwright==1.44``) and the benchmark packages; it imports
nothing from devicerl. `BrowserGymDevice` makes the registered gymnasium environment of each
task (``gym.make("browsergym/<benchmark>.<task>")``, AgentLab's way: headless, env checker
off, the action set as the action mapping), resets it with the episode's seed and steps it
with BrowserGym action strings that the host wrote (`devicerl.envs.browsergym.actions`).

Observations leave as plain data: BrowserGym's screenshot; one element per accessibility-tree
node that carries a ``bid`` and has a box on the screen (BrowserGym's ``extra_element_properties``:
bbox, visibility, clickable, set-of-marks), with its role, name, value and ARIA states;
the goal as the instruction. Reward, termination and BrowserGym's task info pass through.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os

#: Elements an observation carries at most (a real site's tree can hold thousands of nodes).
MAX_ELEMENTS = 400
#: An element counts as visible from this share of its box on screen (BrowserGym's measure).
MIN_VISIBILITY = 0.5
#: Roles of nodes that only structure the page: kept only when clickable or named.
_STRUCTURE = frozenset(("generic", "none", "presentation", "LineBreak", "group"))
_EDITABLE_ROLES = frozenset(("textbox", "searchbox", "combobox", "spinbutton"))
#: ARIA states worth passing on (element attrs).
_STATES = ("checked", "selected", "expanded", "disabled", "required", "pressed", "readonly")


class ConfigError(Exception):
    """Named like the protocol's: the host reads it as a configuration error (no restart)."""


def _jsonable(value):
    return json.loads(json.dumps(value, default=str))


class BrowserGymDevice:
    """BrowserGym tasks as a foreign device (see the module doc)."""

    def __init__(self, chromium=None, miniwob_url=None):
        import browsergym.core  # noqa: F401 - registers browsergym/openended
        import gymnasium  # noqa: F401

        if chromium:
            _use_chromium(chromium)
        if miniwob_url:
            os.environ["MINIWOB_URL"] = miniwob_url
        self.env = None
        self.key = None

    def versions(self):
        from importlib.metadata import PackageNotFoundError, version

        out = {}
        for name in ("browsergym-core", "browsergym-miniwob", "playwright", "numpy", "gymnasium"):
            with contextlib.suppress(PackageNotFoundError):
                out[name] = version(name)
        return out

    def _make(self, task):
        import gymnasium as gym
        from browsergym.core.action.highlevel import HighLevelActionSet

        params = task.get("params") or {}
        gym_id = task["name"]
        benchmark = gym_id.split("/", 1)[1].split(".", 1)[0]
        if benchmark != "openended":
            try:
                importlib.import_module(f"browsergym.{benchmark}")  # registers its tasks
            except ImportError as e:
                raise ConfigError(
                    f"{gym_id} needs its package in BrowserGym's environment ({e})"
                ) from None
        subsets = list(params["action_subsets"])
        kwargs = params.get("task_kwargs") or {}
        key = json.dumps([gym_id, subsets, kwargs], sort_keys=True)
        if key == self.key:
            return
        self.close()
        self.action_set = HighLevelActionSet(
            subsets=subsets, multiaction=True, strict=False, retry_with_force=True,
            demo_mode="off",
        )  # fmt: skip
        self.env = gym.make(
            gym_id,
            disable_env_checker=True,
            headless=True,
            action_mapping=self.action_set.to_python_code,
            **({"task_kwargs": kwargs} if kwargs else {}),
        )
        self.key = key

    def reset(self, task, seed):
        self._make(task)
        obs, info = self.env.reset(seed=seed)
        plain = observation(obs)
        plain["extras"]["task_info"] = _jsonable(info.get("task_info"))
        return plain

    def reset_info(self):
        return {"action_set": sorted(self.action_set.action_set)}

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action["code"])
        status = {
            "done": bool(terminated or truncated),
            "success": float(reward) > 0,
            "raw_reward": float(reward),
            "info": {
                "task_info": _jsonable(info.get("task_info")),
                "browsergym_action": action["code"],
                "last_action_error": obs.get("last_action_error") or "",
            },
        }
        return {"observation": observation(obs), "status": status}

    def close(self):
        env, self.env, self.key = self.env, None, None
        if env is not None:
            env.close()


def _use_chromium(path):
    """Make every browser BrowserGym launches this Chromium: its task browser takes
    ``pw_chromium_kwargs``, but its chat window's browser takes no launch options and would
    look for Playwright's own download."""
    from browsergym.core import _get_global_playwright

    browser_type = _get_global_playwright().chromium
    launch = browser_type.launch

    def launch_this(**kwargs):
        kwargs.setdefault("executable_path", path)
        return launch(**kwargs)

    browser_type.launch = launch_this


def _ax_value(node, key):
    value = (node.get(key) or {}).get("value", "")
    return "" if value is None else str(value)


def _element(node, props, focused, width, height):
    """One node as a plain element, or None when it has no box on the screen."""
    if props is None or props.get("bbox") is None:
        return None
    if (props.get("visibility") or 0.0) < MIN_VISIBILITY:
        return None
    x, y, w, h = props["bbox"]
    left, top = max(0.0, float(x)), max(0.0, float(y))
    right, bottom = min(float(width), float(x) + float(w)), min(float(height), float(y) + float(h))
    if right <= left or bottom <= top:
        return None
    role = _ax_value(node, "role")
    name = _ax_value(node, "name")
    clickable = bool(props.get("clickable"))
    if role in _STRUCTURE and not (clickable or name):
        return None
    states = {p["name"]: (p.get("value") or {}).get("value") for p in node.get("properties", [])}
    attrs = {k: states[k] for k in _STATES if k in states}
    attrs["visibility"] = float(props.get("visibility") or 0.0)
    attrs["set_of_marks"] = bool(props.get("set_of_marks"))
    bid = str(node["browsergym_id"])
    return {
        "id": bid,
        "role": role,
        "text": name,
        "value": _ax_value(node, "value"),
        "bbox": [left, top, right, bottom],
        "clickable": clickable,
        "focused": bid == focused or states.get("focused") is True,
        "editable": role in _EDITABLE_ROLES or states.get("editable") in ("plaintext", "richtext"),
        "attrs": _jsonable(attrs),
    }


def observation(obs):
    """BrowserGym's observation dict as plain data (schema: `devicerl.envs.foreign.remote`)."""
    shot = obs["screenshot"]
    height, width = int(shot.shape[0]), int(shot.shape[1])
    props = obs.get("extra_element_properties") or {}
    focused = obs.get("focused_element_bid") or ""
    elements = []
    for node in (obs.get("axtree_object") or {}).get("nodes", []):
        if node.get("ignored") or not node.get("browsergym_id"):
            continue
        element = _element(node, props.get(node["browsergym_id"]), focused, width, height)
        if element is not None:
            elements.append(element)
            if len(elements) >= MAX_ELEMENTS:
                break
    return {
        "instruction": obs.get("goal") or "",
        "screen_size": [width, height],
        "screenshot": shot,
        "elements": elements,
        "extras": {"url": obs.get("url") or "", "last_action_error": obs.get("last_action_error")},
    }
