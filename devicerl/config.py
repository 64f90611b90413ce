"""Configs: YAML files mapped onto dataclasses, with dotted command-line overrides.

- `load_config(Cls, path, ["actor.lr=3e-4", "env.num_envs=8"])` reads YAML (optional),
  applies overrides (values parsed as YAML scalars), and builds ``Cls`` strictly: an unknown
  key, a value of the wrong type or out of its field's bounds (metadata ``min``/``max``/``gt``/
  ``lt``) raises `ConfigError` in one line naming the dotted key.
- A dataclass may define ``validate(self)`` to check cross-field rules; it runs after building.
- A section whose dataclass another option picks (``env.options`` by ``env.name``) declares
  ``metadata={"type_from": (sibling, pick)}`` and is read as ``pick(sibling's value)``.
- `save_config` writes the resolved config with secrets redacted: any field whose name
  contains key/token/secret/password, or that carries ``metadata={"secret": True}``.
- Field help for ``--help`` comes from ``field(metadata={"help": "..."})``
  (`devicerl.cli.common.config_options` lists it).
- The shipped setups (``devicerl/configs/*.yaml``) are package data, so an installed wheel has
  them too: `config_source` takes a file path or a shipped setup's name
  (``miniwob-digirl-tuned``), `shipped_configs` lists them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import enum
import logging
import math
import types
import typing
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar, get_args, get_origin

import yaml

from devicerl.errors import ConfigError
from devicerl.files import read_text
from devicerl.secrets import is_env_name, is_secret_name, register, scrub_obj

log = logging.getLogger(__name__)
T = TypeVar("T")
REDACTED = "***redacted***"


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


#: Every integer of a config fits in 64 signed bits (what seeds, counts and the libraries below
#: take); every float is finite. Fields may declare narrower bounds in their metadata.
INT_MIN, INT_MAX = -(2**63), 2**63 - 1


def _show(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters: an error stays one short line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_plain(value: Any, key: str, depth: int = 0) -> Any:
    """Free-form values (``dict[str, Any]`` options) obey the number rule too."""
    if depth > 32:
        raise ConfigError(f"{key}: nested too deeply")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{key}={value}: must be a finite number")
    if isinstance(value, int) and not isinstance(value, bool) and not INT_MIN <= value <= INT_MAX:
        raise ConfigError(f"{key}={value}: must fit in 64 bits (in [{INT_MIN}, {INT_MAX}])")
    if isinstance(value, Mapping):
        for k, v in value.items():
            _check_plain(v, f"{key}.{k}", depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_plain(v, f"{key}[{i}]", depth + 1)
    return value


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check/convert ``value`` to type ``tp``; raise ConfigError naming ``key``."""
    origin = get_origin(tp)
    if tp is Any:
        return _check_plain(value, key)
    if origin in (typing.Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        numbers = [a for a in options if a in (int, float)]
        if numbers and isinstance(value, (int, float)) and not isinstance(value, bool):
            options = numbers  # a number is read as one (nan is refused, not taken as text)
        if len(options) == 1:  # an optional value: its own type's error says what is wrong
            return _coerce(value, options[0], key)
        for a in options:
            try:
                return _coerce(value, a, key)
            except ConfigError:
                continue
        raise ConfigError(f"{key}: {_show(value)} is not a valid {_type_name(tp)}")
    if origin is typing.Literal:
        if value not in get_args(tp):
            choices = ", ".join(repr(a) for a in get_args(tp))
            raise ConfigError(f"{key}: {_show(value)} is not one of {choices}")
        return value
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}: expected a mapping for {tp.__name__}, got {_show(value)}")
        return from_dict(tp, value, prefix=key)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            choices = ", ".join(repr(m.value) for m in tp)
            raise ConfigError(f"{key}: {_show(value)} is not one of {choices}") from None
    if origin in (list, tuple, Sequence) or tp in (list, tuple):
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {_show(value)}")
        args = get_args(tp)
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(value):
                raise ConfigError(f"{key}: expected {len(args)} items, got {len(value)}")
            return tuple(_coerce(v, a, f"{key}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
        item = args[0] if args else Any
        items = [_coerce(v, item, f"{key}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple or tp is tuple else items
    if origin in (dict, Mapping) or tp is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}: expected a mapping, got {_show(value)}")
        args = get_args(tp)
        vt = args[1] if len(args) == 2 else Any
        return {k: _coerce(v, vt, f"{key}.{k}") for k, v in value.items()}
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: expected true/false, got {_show(value)}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{key}={value}: must be a finite number")
        raise ConfigError(f"{key}: expected an integer, got {_show(value)}")
    if tp is float:
        number: float | None = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                number = float(value)
            except OverflowError:
                raise ConfigError(f"{key}={_show(value)}: must be a finite number") from None
        elif isinstance(value, str):
            with contextlib.suppress(ValueError):
                number = float(value)
        if number is None:
            raise ConfigError(f"{key}: expected a number, got {_show(value)}")
        if not math.isfinite(number):
            raise ConfigError(f"{key}={value}: must be a finite number")
        return number
    if tp is str:
        if isinstance(value, str):
            return value
        if value is None:  # `key:` with nothing after it in YAML: the empty string
            return ""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        raise ConfigError(f"{key}: expected a string, got {_show(value)}")
    if isinstance(tp, type) and not isinstance(value, tp):
        raise ConfigError(f"{key}: expected {_type_name(tp)}, got {_show(value)}")
    return value


def from_dict(cls: type[T], data: Mapping[str, Any], prefix: str = "") -> T:
    """Build dataclass ``cls`` from a mapping, strictly (unknown keys and bad types fail)."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if k not in fields:
            close = difflib.get_close_matches(str(k), list(fields), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown config key {key!r}{hint}")
        kwargs[k] = _coerce(v, _field_type(fields, k, hints[k], data, prefix), key)
    for name, value in kwargs.items():
        check_bounds(f"{prefix}.{name}" if prefix else name, value, fields[name].metadata)
    try:
        obj = cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError, ArithmeticError) as e:
        raise ConfigError(f"{prefix or cls.__name__}: {e}") from None
    validate = getattr(obj, "validate", None)
    if callable(validate):
        validate()
    if not prefix:
        check_references(obj)
    register(*(v for k, v in kwargs.items() if k.endswith("_env") and isinstance(v, str)))
    return obj


def _field_type(
    fields: Mapping[str, dataclasses.Field],
    name: str,
    hint: Any,
    data: Mapping[str, Any],
    prefix: str,
) -> Any:
    """The type field ``name`` is read as: its annotation, or for a section whose dataclass a
    sibling option picks, ``metadata={"type_from": (sibling, pick)}``, ``pick(sibling's value)``
    (``env.options``: the options dataclass of the device ``env.name`` names)."""
    if "type_from" not in fields[name].metadata:
        return hint
    sibling, pick = fields[name].metadata["type_from"]
    try:
        return pick(data.get(sibling, fields[sibling].default))
    except ConfigError as e:
        raise ConfigError(f"{prefix}.{sibling}: {e}" if prefix else f"{sibling}: {e}") from None


#: Bounds a field may declare in its metadata: ``{"min": 1}``, ``{"gt": 0}``,
#: ``{"min": 0, "lt": 1}`` (inclusive ``min``/``max``, exclusive ``gt``/``lt``), and
#: ``{"max_key": "replay_capacity"}``: at most the value of another field of the whole config
#: (a dotted key from its root), e.g. a minibatch drawn from what the replay holds.
BOUNDS = ("min", "gt", "max", "lt", "max_key")


def bounds_text(meta: Mapping[str, Any]) -> str:
    """``>= 1``, ``> 0``, ``in [0, 1)``: a field's declared bounds, for errors and ``--help``."""
    lo, hi = ("min", "gt"), ("max", "lt")
    low = next(((k, meta[k]) for k in lo if k in meta), None)
    high = next(((k, meta[k]) for k in hi if k in meta), None)
    if "max_key" in meta and not high:
        high = ("max", meta["max_key"])
    if low and high:
        left, right = "[" if low[0] == "min" else "(", "]" if high[0] == "max" else ")"
        return f"in {left}{low[1]}, {high[1]}{right}"
    sign = {"min": ">=", "gt": ">", "max": "<=", "lt": "<"}
    k, v = low or high or ("", "")
    return f"{sign[k]} {v}" if k else ""


#: A string field's declared form: ``{"form": "env_name"}`` (`FORMS` names each); the error
#: says what the value should be and never shows it (what was typed may be a secret).
FORMS = {
    "env_name": (
        is_env_name,
        "the name of an environment variable (letters, digits, _), or empty; the value is not "
        "shown: put a key in a variable and name the variable here",
    )
}


def check_bounds(key: str, value: Any, meta: Mapping[str, Any]) -> None:
    """Raise `ConfigError` (``key=value: must be >= 1``) when ``value`` is out of the field's
    declared bounds, or an integer does not fit in 64 bits; None (an unset optional) passes."""
    if isinstance(value, str) and "form" in meta:
        valid, text = FORMS[meta["form"]]
        if value and not valid(value):
            raise ConfigError(f"{key}: must be {text}")
        return
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    ok = (
        ("min" not in meta or value >= meta["min"])
        and ("gt" not in meta or value > meta["gt"])
        and ("max" not in meta or value <= meta["max"])
        and ("lt" not in meta or value < meta["lt"])
    )
    if not ok:
        shown = f"{value:g}" if isinstance(value, float) else _show(value)
        raise ConfigError(f"{key}={shown}: must be {bounds_text(meta)}")
    if isinstance(value, int) and not INT_MIN <= value <= INT_MAX:
        # the 64-bit range closes whatever side the field leaves open
        low = {k: meta[k] for k in ("min", "gt") if k in meta} or {"min": INT_MIN}
        high = {k: meta[k] for k in ("max", "lt") if k in meta} or {"max": INT_MAX}
        raise ConfigError(f"{key}={_show(value)}: must be {bounds_text({**low, **high})}")


def _lookup(root: Any, dotted: str) -> Any:
    """The value at a dotted key of ``root``; None when this config has no such key."""
    node = root
    for part in dotted.split("."):
        node = getattr(node, part, None)
    return node


_ROOT = object()


def check_references(root: Any, node: Any = _ROOT, prefix: str = "") -> None:
    """Check every ``max_key`` bound of the config tree under ``root`` (its values are known
    only once the whole config is built); `from_dict` calls it on the root it builds."""
    node = root if node is _ROOT else node
    if isinstance(node, Mapping):
        for k, v in node.items():
            check_references(root, v, f"{prefix}.{k}" if prefix else str(k))
        return
    if not dataclasses.is_dataclass(node) or isinstance(node, type):
        return
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        key = f"{prefix}.{f.name}" if prefix else f.name
        ref = f.metadata.get("max_key")
        if ref and isinstance(value, (int, float)) and not isinstance(value, bool):
            limit = _lookup(root, ref)
            if isinstance(limit, (int, float)) and value > limit:
                raise ConfigError(f"{key}={_show(value)}: must be <= {ref} ({limit})")
        check_references(root, value, key)


def to_dict(obj: Any) -> Any:
    """Dataclass (nested) -> plain dict of YAML-friendly values."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, Mapping):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def _parse_scalar(text: str) -> Any:
    try:
        return safe_load(text)
    except yaml.YAMLError:
        return text


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides to a nested dict (values parsed as YAML)."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like key.path=value")
        path, _, raw = item.partition("=")
        keys = path.strip().split(".")
        node = data
        for k in keys[:-1]:
            nxt = node.setdefault(k, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"override {item!r}: {k!r} is not a section")
            node = nxt
        node[keys[-1]] = _parse_scalar(raw) if raw.strip() else ""  # `key=`: empty string
    return data


#: The largest config file read, and the most nodes its YAML may expand to (aliases included):
#: a config is a page of settings, and a few lines of aliases can otherwise expand to billions.
MAX_CONFIG_BYTES = 1 << 20
MAX_YAML_NODES = 100_000


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses a key given twice in one mapping (the spec forbids it;
    PyYAML would keep the last value silently) and documents whose aliases expand too far."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base class names it
                break
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first on line {first.start_mark.line + 1})",
                    key_node.start_mark,
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def _expanded_size(node: yaml.Node, memo: dict[int, int], limit: int) -> int:
    """Nodes ``node`` stands for once every alias is expanded (counted without expanding)."""
    if id(node) in memo:
        return memo[id(node)]
    memo[id(node)] = limit + 1  # a node that contains itself expands without end
    if isinstance(node, yaml.MappingNode):
        children = [n for pair in node.value for n in pair]
    elif isinstance(node, yaml.SequenceNode):
        children = list(node.value)
    else:
        children = []
    size = 1
    for child in children:
        size += _expanded_size(child, memo, limit)
        if size > limit:
            break
    memo[id(node)] = size
    return size


def safe_load(text: str) -> Any:
    """YAML ``text`` as Python values, like ``yaml.safe_load``, but a duplicate key or aliases
    that expand past `MAX_YAML_NODES` nodes raise ``yaml.YAMLError`` instead."""
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node, {}, MAX_YAML_NODES) > MAX_YAML_NODES:
            raise yaml.YAMLError(f"its aliases expand to more than {MAX_YAML_NODES} nodes")
        return loader.construct_document(node)
    finally:
        loader.dispose()


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A config file's mapping: a regular UTF-8 file of at most `MAX_CONFIG_BYTES` holding
    valid YAML (no duplicate keys, bounded aliases); anything else is one `ConfigError` line."""
    p = Path(path)
    text = read_text(p, MAX_CONFIG_BYTES, what="config", error=ConfigError)
    try:
        data = safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"config {p} is not valid YAML: {yaml_error_text(e)}") from None
    except RecursionError:
        raise ConfigError(f"config {p} is not valid YAML: nested too deeply") from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"config {p} must hold a mapping at the top level")
    return data


def yaml_error_text(e: yaml.YAMLError) -> str:
    """``line 3, column 7: mapping values are not allowed here`` (1-based, as editors count)."""
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    if mark is None:
        return " ".join(str(problem).split())
    return f"line {mark.line + 1}, column {mark.column + 1}: {' '.join(str(problem).split())}"


def shipped_configs() -> dict[str, Path]:
    """Shipped setup name -> its file, read from the installed package (not from a checkout's
    layout), sorted by name."""
    folder = resources.files(__package__) / "configs"
    files = [f for f in folder.iterdir() if f.name.endswith(".yaml")]
    return {f.name.removesuffix(".yaml"): Path(str(f)) for f in sorted(files, key=str)}


def config_source(spec: str | Path) -> Path:
    """The config file `spec` names: an existing file, else a shipped setup by name (with or
    without ``.yaml``); `ConfigError` naming the choices otherwise."""
    path = Path(spec)
    if path.is_file() or path.exists():  # any other kind of file: the loader names it
        return path
    shipped = shipped_configs()
    name = path.name.removesuffix(".yaml") if path.parent == Path(".") else None
    if name in shipped:
        return shipped[name]
    close = difflib.get_close_matches(str(name or path.stem), list(shipped), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise ConfigError(
        f"config {spec} is neither a file nor a shipped setup{hint}; shipped setups: "
        f"{', '.join(shipped)}"
    )


def load_config(
    cls: type[T],
    path: str | Path | None = None,
    overrides: Sequence[str] = (),
    base: Mapping[str, Any] | None = None,
) -> T:
    """Build ``cls`` from ``base`` <- YAML file <- dotted overrides."""
    data: dict[str, Any] = _deep_merge(dict(base or {}), read_yaml(path) if path else {})
    apply_overrides(data, overrides)
    return from_dict(cls, data)


def _deep_merge(a: dict[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    for k, v in b.items():
        if isinstance(v, Mapping) and isinstance(a.get(k), dict):
            a[k] = _deep_merge(dict(a[k]), v)
        else:
            a[k] = v
    return a


def saved_section(data: dict[str, Any], dotted: str) -> dict[str, Any] | None:
    """The nested mapping at ``dotted`` (``""``: `data` itself) of a saved config read as
    nested mappings, each level copied in place so it can be edited; None where a level is
    missing or not a mapping."""
    node: Any = data
    for part in [p for p in dotted.split(".") if p]:
        child = node.get(part) if isinstance(node, dict) else None
        if not isinstance(child, Mapping):
            return None
        node[part] = child = dict(child)
        node = child
    return node


#: A retired option's "value now used" when the saved value meant nothing in that run (an
#: option of an agent kind or a learner the run did not use): dropped without a word.
IGNORED: Any = object()


def _same(old: Any, now: Any) -> bool:
    """Saved and current values alike, lists and tuples alike (YAML has only lists)."""
    if isinstance(old, (list, tuple)) and isinstance(now, (list, tuple)):
        return len(old) == len(now) and all(_same(a, b) for a, b in zip(old, now))
    if isinstance(old, Mapping) and isinstance(now, Mapping):
        return old.keys() == now.keys() and all(_same(old[k], now[k]) for k in old)
    return bool(old == now) and isinstance(old, bool) == isinstance(now, bool)


def retire(data: dict[str, Any], path: str, now: Any, prefix: str = "", used: str = "") -> None:
    """Remove the retired option at dotted ``path`` from a saved config (`data`, edited in
    place); a saved value other than ``now`` (the value the code uses in its place) is logged in
    one line (`prefix` + path, then `used`, formatted with ``now``, or ``now`` itself)."""
    where, _, key = path.rpartition(".")
    holder = saved_section(data, where)
    if holder is None or key not in holder:
        return
    old = holder.pop(key)
    if now is not IGNORED and not _same(old, now):
        shown = used.format(now=now) if used else _show(now)
        log.warning("%s%s=%s saved by an older version is not an option any more; %s is used",
                    prefix, path, _show(old), shown)  # fmt: skip


def drop_retired(
    data: dict[str, Any], retired: Mapping[str, Any], prefix: str = "", used: str = ""
) -> None:
    """`retire` each option of `retired` (dotted key -> the value the code now uses)."""
    for path, now in retired.items():
        retire(data, path, now, prefix, used)


def used_only(retired: Mapping[str, Any], used: bool) -> dict[str, Any]:
    """`retired` where the run used those options, else every value `IGNORED`."""
    return dict(retired) if used else dict.fromkeys(retired, IGNORED)


def saved_pop(data: dict[str, Any], path: str) -> tuple[bool, Any]:
    """Remove and return the value at dotted ``path`` of a saved config: (found, value)."""
    where, _, key = path.rpartition(".")
    holder = saved_section(data, where)
    if holder is None or key not in holder:
        return False, None
    return True, holder.pop(key)


def saved_put(data: dict[str, Any], path: str, value: Any) -> None:
    """Set dotted ``path`` of a saved config to ``value``, creating the sections on the way,
    unless the config already holds it (a key of the newer layout wins); a level that is not a
    mapping is left for the loader to name."""
    where, _, key = path.rpartition(".")
    node: Any = data
    for part in [p for p in where.split(".") if p]:
        child = node.get(part)
        if child is None:
            child = {}
        elif not isinstance(child, Mapping):
            return
        node[part] = child = dict(child)
        node = child
    node.setdefault(key, value)


def saved_move(data: dict[str, Any], old: str, new: str) -> None:
    """Carry the option saved at dotted ``old`` over to ``new`` (an option renamed or moved)."""
    found, value = saved_pop(data, old)
    if found:
        saved_put(data, new, value)


def saved_number(key: str, value: Any, kind: type = float) -> Any:
    """``value``, a number (``kind`` int: a whole one) an older version saved at ``key``; a
    `ConfigError` naming the key otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{key}: {_show(value)} saved by an older version is not a number")
    if kind is int and not float(value).is_integer():
        raise ConfigError(f"{key}: {_show(value)} saved by an older version is not a whole number")
    return kind(value)


def saved_flag(key: str, value: Any) -> bool:
    """``value``, a true/false an older version saved at ``key``; a `ConfigError` otherwise."""
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: {_show(value)} saved by an older version is not true/false")
    return value


def _secret_fields(cls: type) -> set[str]:
    return {
        f.name
        for f in dataclasses.fields(cls)
        if f.metadata.get("secret") or is_secret_name(f.name)
    }


def redact(obj: Any) -> Any:
    """A plain-dict copy of a config to write: secret fields replaced by a marker, and every
    other string passed through the scrubber (`devicerl.secrets.scrub`), so a key typed into
    any field (a model name, a device option) is written masked whatever the field is called."""
    return scrub_obj(_redact(obj))


def _redact(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        secrets = _secret_fields(type(obj))
        out = {}
        for f in dataclasses.fields(obj):
            v = getattr(obj, f.name)
            out[f.name] = (
                REDACTED if (f.name in secrets and isinstance(v, str) and v) else _redact(v)
            )
        return out
    if isinstance(obj, Mapping):
        return {
            k: (REDACTED if (is_secret_name(str(k)) and isinstance(v, str) and v) else _redact(v))
            for k, v in obj.items()
        }
    return to_dict(obj)


def save_config(obj: Any, path: str | Path) -> None:
    """Write the resolved config as YAML, secrets redacted, atomically."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(yaml.safe_dump(redact(obj), sort_keys=False), encoding="utf-8")
    tmp.replace(p)
