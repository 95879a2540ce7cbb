"""Turn manifest JSON into the frozen dataclasses of ``types`` and back, checking as it goes.

The dataclasses carry their schema facts in field metadata (``spec_field``): JSON name (the
camelCase of the attribute unless given), bounds, patterns, lengths and whether an integer is
written as a size or a duration. One generic walker enforces them, so the models mirror the
CRDs' structural checks without a second hand-written validator per class; cross-field rules
(the CEL rules) live in each class's ``check(path)``. A test compares this metadata with the
CRD YAML so the two cannot drift. Like the API server, the walker reports every broken field of
a manifest in one ``InvalidSpecError``, not the first; cross-field rules of an object run once its
own fields are valid.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
import typing
from collections.abc import Mapping
from datetime import datetime
from enum import Enum
from functools import cache
from types import MappingProxyType
from typing import Any, TypeVar

from txntable.api.conditions import format_time, parse_time
from txntable.api.errors import InvalidSpecError
from txntable.api.quantity import (
    DURATION_PATTERN,
    SIZE_PATTERN,
    QuantityError,
    format_duration,
    parse_bytes,
    parse_duration,
    parse_size,
)

T = TypeVar("T")

SIZE = "size"
DURATION = "duration"


def spec_field(
    default: Any = dataclasses.MISSING,
    *,
    factory: Any = dataclasses.MISSING,
    name: str | None = None,
    kind: str | None = None,
    minimum: int | None = None,
    maximum: int | None = None,
    pattern: str | None = None,
    min_length: int | None = None,
    max_length: int | None = None,
    min_items: int | None = None,
    max_items: int | None = None,
    text_default: str | None = None,
    hint: str | None = None,
) -> Any:
    """A dataclass field with the schema facts the codec checks and the CRD test compares.

    ``kind`` is ``"size"`` (int bytes written as a quantity) or ``"duration"`` (int seconds
    written as ``30d``/``1h``); ``text_default`` is the default as the CRD spells it. ``hint``
    says in words what ``pattern`` admits (``"a five-field cron schedule"``): a value that does
    not match is reported with it, never with the regular expression (sizes and durations are
    explained by their parsers).
    """
    if kind == SIZE:
        pattern = pattern or SIZE_PATTERN
    elif kind == DURATION:
        pattern = pattern or DURATION_PATTERN
        max_length = max_length or 32
    if text_default is not None and default is dataclasses.MISSING:
        default = parse_bytes(text_default) if kind == SIZE else parse_duration(text_default)
    meta = {
        "name": name,
        "kind": kind,
        "minimum": minimum,
        "maximum": maximum,
        "pattern": pattern,
        "min_length": min_length,
        "max_length": max_length,
        "min_items": min_items,
        "max_items": max_items,
        "text_default": text_default,
        "hint": hint,
    }
    meta = {k: v for k, v in meta.items() if v is not None}
    if isinstance(default, Mapping):  # mappings are unhashable: give each instance its own
        frozen = MappingProxyType(dict(default))
        factory = lambda: frozen  # noqa: E731
    if factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def camel(name: str) -> str:
    """``z_order_by`` -> ``zOrderBy``."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def json_name(field: dataclasses.Field[Any]) -> str:
    """The manifest key of a dataclass field."""
    return str(field.metadata.get("name") or camel(field.name))


@cache
def json_fields(cls: type) -> dict[str, dataclasses.Field[Any]]:
    """A dataclass's fields by manifest key (cached: ``dataclasses.fields`` builds a tuple at
    every call, and every parse of every body called it for each nested object)."""
    return {json_name(f): f for f in dataclasses.fields(cls)}


@cache
def field_names(cls: type) -> tuple[tuple[str, str, Any], ...]:
    """(attribute, manifest key, metadata) of each field of a dataclass, for ``to_obj``."""
    return tuple((f.name, json_name(f), f.metadata) for f in dataclasses.fields(cls))


@cache
def hints(cls: type) -> dict[str, Any]:
    """Resolved type hints of a dataclass (cached: they never change at run time)."""
    return typing.get_type_hints(cls)


def unwrap_optional(tp: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True); anything else -> (tp, False)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0], True
    return tp, False


def _fail(path: str, reason: str) -> typing.NoReturn:
    raise InvalidSpecError(path, reason)


class _Errors:
    """Collects the errors of the fields of one object, so all of them are reported."""

    def __init__(self) -> None:
        self.found: list[InvalidSpecError] = []

    def add(self, path: str, reason: str) -> None:
        self.found.append(InvalidSpecError(path, reason))

    def attempt(self, fn: typing.Callable[..., T], *args: Any) -> T | None:
        """``fn(*args)``, or None with its ``InvalidSpecError`` kept for ``raise_any``."""
        try:
            return fn(*args)
        except InvalidSpecError as exc:
            self.found.append(exc)
            return None

    def raise_any(self) -> None:
        if self.found:
            raise InvalidSpecError.combine(self.found)


def _check_str(value: str, meta: Mapping[str, Any], path: str) -> None:
    if "min_length" in meta and len(value) < meta["min_length"]:
        _fail(path, f"must be at least {meta['min_length']} characters")
    if "max_length" in meta and len(value) > meta["max_length"]:
        _fail(path, f"must be at most {meta['max_length']} characters")
    if "pattern" in meta and ecma_search(meta["pattern"], value) is None:
        kind = meta.get("kind")
        if kind == SIZE:
            parse_size(value)  # raises, saying what a size looks like
        elif kind == DURATION:
            parse_duration(value)  # raises, saying what a duration looks like
        _fail(path, f"{value!r} is not {meta.get('hint') or 'in the form the CRD requires'}")


@functools.lru_cache(maxsize=256)
def _as_ecma(pattern: str) -> re.Pattern[str]:
    """``pattern`` with the API server's (ECMA-262) meaning of ``$``: the end of the input.

    In Python ``$`` also matches before a final newline, so a value ending in a newline passed
    ``^...$`` here while the API server rejects it. Unescaped ``$`` outside character classes
    becomes Python's end-of-input anchor."""
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if char == "[":
            in_class = True
        elif char == "]":
            in_class = False
        out.append(r"\Z" if char == "$" and not in_class else char)
        i += 1
    return re.compile("".join(out))


def ecma_search(pattern: str, value: str) -> re.Match[str] | None:
    """``re.search`` with the API server's anchors (see ``_as_ecma``)."""
    return _as_ecma(pattern).search(value)


def _check_int(value: int, meta: Mapping[str, Any], path: str) -> None:
    if "minimum" in meta and value < meta["minimum"]:
        _fail(path, f"must be >= {meta['minimum']}")
    if "maximum" in meta and value > meta["maximum"]:
        _fail(path, f"must be <= {meta['maximum']}")


def is_open_enum(tp: Any) -> bool:
    """``SomeStrEnum | str``: a string field whose known values are an enum's members (a
    condition's reason: ours are ``Reason``, another writer's are any CamelCase text)."""
    args = typing.get_args(tp) if isinstance(tp, types.UnionType) else ()
    return (
        len(args) == 2
        and str in args
        and any(isinstance(a, type) and issubclass(a, Enum) for a in args)
    )


def _convert(tp: Any, value: Any, meta: Mapping[str, Any], path: str) -> Any:
    tp, optional = unwrap_optional(tp)
    if value is None:
        if optional:
            return None
        _fail(path, "must not be null")
    origin = typing.get_origin(tp)
    kind = meta.get("kind")
    if tp is bool:
        if not isinstance(value, bool):
            _fail(path, "must be a boolean")
        return value
    if tp is int and kind == SIZE:
        try:
            if isinstance(value, str):
                _check_str(value, meta, path)
            size = parse_bytes(value)
        except QuantityError as exc:
            _fail(path, str(exc))
        _check_int(size, meta, path)
        return size
    if tp is int and kind == DURATION:
        if not isinstance(value, str):
            _fail(path, "must be a duration string (e.g. 30d, 12h, 1h30m, 90s)")
        try:
            _check_str(value, meta, path)
            return parse_duration(value)
        except QuantityError as exc:
            _fail(path, str(exc))
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            _fail(path, "must be an integer")
        _check_int(value, meta, path)
        return value
    if tp is str or is_open_enum(tp):  # ``SomeEnum | str``: the model maps known values
        if not isinstance(value, str):
            _fail(path, "must be a string")
        _check_str(value, meta, path)
        return value
    if tp is datetime:
        try:
            return parse_time(str(value))
        except ValueError:
            _fail(path, f"{value!r} is not an RFC 3339 time")
    if isinstance(tp, type) and issubclass(tp, Enum):
        allowed = [m.value for m in tp]
        if value not in allowed:
            _fail(path, f"{value!r} is not one of {allowed}")
        return tp(value)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return from_obj(tp, value, path)
    if origin is tuple:
        return _convert_tuple(tp, value, meta, path)
    if origin in (Mapping, dict) or tp is Mapping:
        return _convert_mapping(value, meta, path)
    raise TypeError(f"the codec cannot read {tp!r} at {path}")  # a bug in a model, not input


def _convert_tuple(tp: Any, value: Any, meta: Mapping[str, Any], path: str) -> tuple[Any, ...]:
    """A JSON list as ``tuple[item, ...]``: the list's own bounds, then every item (the string
    checks of ``meta`` apply to each), all broken items reported at once."""
    (item_tp, _ellipsis) = typing.get_args(tp)
    if not isinstance(value, list):
        _fail(path, "must be a list")
    if "min_items" in meta and len(value) < meta["min_items"]:
        _fail(path, f"must have at least {meta['min_items']} items")
    if "max_items" in meta and len(value) > meta["max_items"]:
        _fail(path, f"must have at most {meta['max_items']} items")
    item_meta = {
        k: v for k, v in meta.items() if k in ("pattern", "hint", "max_length", "min_length")
    }
    errors = _Errors()
    items = [
        errors.attempt(_convert, item_tp, v, item_meta, f"{path}[{i}]") for i, v in enumerate(value)
    ]
    errors.raise_any()
    return tuple(items)


def _convert_mapping(value: Any, meta: Mapping[str, Any], path: str) -> Mapping[str, str]:
    """A JSON object of strings as a read-only mapping, all broken entries reported at once."""
    if not isinstance(value, dict):
        _fail(path, "must be an object")
    if "max_items" in meta and len(value) > meta["max_items"]:
        _fail(path, f"must have at most {meta['max_items']} entries")
    out: dict[str, str] = {}
    errors = _Errors()
    for key, item in value.items():
        if not isinstance(item, str):
            errors.add(f"{path}[{key}]", "must be a string")
        elif "max_length" in meta and len(item) > meta["max_length"]:
            errors.add(f"{path}[{key}]", f"must be at most {meta['max_length']} characters")
        out[str(key)] = item
    errors.raise_any()
    return MappingProxyType(out)


def from_obj(cls: type[T], obj: Any, path: str, *, ignore_unknown: bool = False) -> T:
    """Build dataclass ``cls`` from a JSON object, or raise ``InvalidSpecError`` at ``path``.

    ``ignore_unknown`` skips unknown keys at this level only (status objects may carry keys
    other tools write, such as Kopf's ``status.kopf``, where no API server prunes them).
    """
    if not isinstance(obj, dict):
        _fail(path, "must be an object")
    fields = json_fields(typing.cast(type, cls))
    errors = _Errors()
    if ignore_unknown:
        obj = {k: v for k, v in obj.items() if k in fields}
    for key in sorted(set(obj) - set(fields)):
        errors.add(f"{path}.{key}" if path else key, "unknown field")
    kwargs: dict[str, Any] = {}
    resolved = hints(typing.cast(type, cls))
    for key, field in fields.items():
        sub = f"{path}.{key}" if path else key
        if key not in obj:
            no_default = field.default is dataclasses.MISSING
            if no_default and field.default_factory is dataclasses.MISSING:
                errors.add(sub, "required")
            continue
        kwargs[field.name] = errors.attempt(
            _convert, resolved[field.name], obj[key], field.metadata, sub
        )
    errors.raise_any()
    try:
        built = cls(**kwargs)
    except InvalidSpecError as exc:
        raise (exc.within(path) if path else exc) from None
    check = getattr(built, "check", None)
    if check is not None:
        check(path)
    return built


def _dump(value: Any, meta: Mapping[str, Any]) -> Any:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return format_duration(value) if meta.get("kind") == DURATION else value
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return format_time(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_obj(value)
    if isinstance(value, tuple | list):
        return [_dump(v, {}) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _dump(v, {}) for k, v in value.items()}
    raise TypeError(f"cannot serialize {value!r}")


def to_obj(instance: Any) -> dict[str, Any]:
    """The JSON object for a dataclass instance (camelCase keys, ``None`` omitted)."""
    out: dict[str, Any] = {}
    for attr, key, metadata in field_names(typing.cast(type, type(instance))):
        value = getattr(instance, attr)
        if value is not None:
            out[key] = _dump(value, metadata)
    return out
