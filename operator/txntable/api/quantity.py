"""Sizes and durations as people write them in manifests: ``128Mi``, ``1Gi``, ``512MB``, ``1h30m``.

The CRDs accept sizes as Kubernetes quantities (or plain integers of bytes), because the API
server's CEL ``quantity()`` library can then compare them (``targetFileSize >= minFileSize``).
``parse_bytes`` reads exactly that grammar; with ``lenient=True`` it also takes the spellings a
person types on a command line (``512MB``, ``64MiB``, ``1gb``), which the CRDs do not admit.
Durations are Go-style (``90s``, ``1h30m``) plus days (``30d``), always whole seconds.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Final

_BINARY: Final = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: Final = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}

# The size pattern the CRDs use: a positive number, a fraction only with a suffix (1.5Gi).
# Kept here so the schema and the model share one spelling (a test compares them).
SIZE_PATTERN: Final = r"^[0-9]*[1-9][0-9]*((\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E))?$"
DURATION_PATTERN: Final = r"^([0-9]+(d|h|m|s))+$"

# Kubernetes' full quantity grammar (sign, exponent, milli) for parse_quantity.
_QUANTITY_RE: Final = re.compile(
    r"^(?P<num>[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"
)
_LENIENT_RE: Final = re.compile(
    r"^(?P<num>[0-9]+(\.[0-9]+)?)\s*(?P<unit>[kmgtpe]?i?b?)$", re.IGNORECASE
)
_DURATION_PART: Final = re.compile(r"([0-9]+)(d|h|m|s)")
_DURATION_UNIT: Final = {"d": 86400, "h": 3600, "m": 60, "s": 1}


class QuantityError(ValueError):
    """A size or duration string does not follow the grammar, or is not a whole number."""


def parse_quantity(text: str) -> Decimal:
    """Parse a Kubernetes quantity (``1.5Gi``, ``500m``, ``1e3``) to its exact decimal value."""
    match = _QUANTITY_RE.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise QuantityError(f"{text!r} is not a Kubernetes quantity (e.g. 128Mi, 1Gi, 500M)")
    try:
        number = Decimal(match["num"])
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only numbers
        raise QuantityError(f"{text!r} is not a number") from exc
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    if suffix == "m":
        return number / 1000
    return number * (Decimal(10) ** int(suffix[1:]))


def _lenient(text: str) -> Decimal | None:
    match = _LENIENT_RE.match(text.strip())
    if match is None:
        return None
    unit = str(match["unit"]).lower().rstrip("b")
    if unit == "":
        return Decimal(str(match["num"]))
    scale = 1024 if unit.endswith("i") else 1000
    power = "kmgtpe".index(unit[0]) + 1
    return Decimal(str(match["num"])) * Decimal(scale) ** power


def parse_bytes(value: int | str, *, lenient: bool = False) -> int:
    """Return a size in bytes from an integer or a quantity string; reject negatives.

    ``lenient`` also accepts ``512MB`` / ``64MiB`` / ``1gb`` (decimal for ``MB``, binary for
    ``MiB``), for command lines; manifests use the strict Kubernetes grammar.
    """
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a size")
    if isinstance(value, int):
        amount = Decimal(value)
    elif isinstance(value, str):
        try:
            amount = parse_quantity(value)
        except QuantityError:
            parsed = _lenient(value) if lenient else None
            if parsed is None:
                raise
            amount = parsed
    else:
        raise QuantityError(f"{value!r} is not a size (an integer or a quantity string)")
    if amount < 0:
        raise QuantityError(f"{value!r} is negative")
    if amount != amount.to_integral_value():
        raise QuantityError(f"{value!r} is not a whole number of bytes")
    return int(amount)


def format_bytes(size: int) -> str:
    """Render bytes as the shortest exact binary quantity (``134217728`` -> ``128Mi``)."""
    if size < 0:
        raise QuantityError(f"{size} is negative")
    for suffix, factor in reversed(_BINARY.items()):
        if size and size % factor == 0:
            return f"{size // factor}{suffix}"
    return str(size)


def parse_duration(text: str) -> int:
    """Parse ``30d``, ``720h``, ``1h30m``, ``90s`` to whole seconds (at least one second)."""
    if not isinstance(text, str) or re.fullmatch(DURATION_PATTERN[1:-1], text) is None:
        raise QuantityError(f"{text!r} is not a duration (e.g. 30d, 12h, 1h30m, 90s)")
    seconds = sum(int(n) * _DURATION_UNIT[u] for n, u in _DURATION_PART.findall(text))
    if seconds <= 0:
        raise QuantityError(f"{text!r} must be longer than zero")
    return seconds


def format_duration(seconds: int) -> str:
    """Render seconds in the largest exact unit (``86400`` -> ``1d``, ``5400`` -> ``90m``)."""
    if seconds <= 0:
        raise QuantityError(f"{seconds} must be longer than zero")
    for unit, factor in _DURATION_UNIT.items():
        if seconds % factor == 0:
            return f"{seconds // factor}{unit}"
    return f"{seconds}s"  # pragma: no cover - every integer is a whole number of seconds
