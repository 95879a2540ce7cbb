"""Readable ids for parametrized cases, so a failing case names what it tried.

pytest names a case by its values only when they are strings, numbers, enums or None; any
other value (a dict of options, a list, a Protocol, a model) becomes ``argname0``, ``argname1``,
and a failure report then says nothing about the case. ``readable`` is an ``ids=`` callable that
spells such values out compactly: ``{"replicaCount": 2}`` -> ``replicaCount=2``, a list -> its
items joined by ``+``, an exception -> its class and first line, a dataclass -> its class and the
fields it sets away from their defaults. Long renderings are cut, and pytest makes any duplicate
unique by its own suffix.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Mapping
from typing import Any

LIMIT = 60


def render(value: Any) -> str:
    """A compact text for any value a case holds."""
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, bool | int | float | str) or value is None:
        return " ".join(str(value).split()) if isinstance(value, str) else str(value)
    if isinstance(value, type):
        return value.__name__
    if isinstance(value, BaseException):
        return f"{type(value).__name__}:{render(str(value).splitlines()[0] if str(value) else '')}"
    if isinstance(value, re.Pattern):
        return render(value.pattern)
    if isinstance(value, Mapping):
        return ",".join(f"{k}={render(v)}" for k, v in value.items()) or "{}"
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        return "+".join(render(v) for v in items) or "[]"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changed = []
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if f.default is not dataclasses.MISSING and v == f.default:
                continue
            if f.default_factory is not dataclasses.MISSING and v == f.default_factory():
                continue
            changed.append(f"{f.name}={render(v)}")
        return f"{type(value).__name__}({','.join(changed)})"
    return " ".join(str(value).split())


def readable(value: Any) -> str | None:
    """``ids=`` callable: ``None`` (pytest's own id) for short plain values, else ``render`` cut."""
    if isinstance(value, bool | int | float | enum.Enum) or value is None:
        return None
    if isinstance(value, str) and len(value) <= LIMIT and "\n" not in value:
        return None
    text = render(value)
    return text if len(text) <= LIMIT else text[: LIMIT - 1] + "~"
