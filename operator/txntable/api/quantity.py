"""Sizes and durations as people write them in manifests: ``128Mi``, ``1Gi``, ``512MB``, ``1h30m``.

The CRDs accept sizes as Kubernetes quantities (or plain integers of bytes), because the API
server's CEL ``quantity()`` library can then compare them (``targetFileSize >= minFileSize``).
``parse_size`` reads exactly what the CRDs admit (``SIZE_PATTERN``), and the command line uses it
too, so ``64M`` is 64,000,000 bytes and ``64Mi`` is 64 MiB everywhere; spellings such as ``64MB``
or ``1GiB`` are rejected with the two quantities they could mean. Durations follow the grammar every
duration of txntable shares (``txntable.durations``: ``30d``, ``1h30m``, ``7 days``), in manifests
whole seconds longer than zero.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Final

from txntable.durations import (
    MANIFEST_PATTERN,
    DurationError,
    format_seconds,
    parse_manifest_seconds,
)

_BINARY: Final = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: Final = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}

# The size pattern the CRDs use: a positive whole number of bytes. The whole part is at least
# 1; a fraction only with a suffix, and only one that keeps the size whole: as many digits as
# the decimal suffix has zeros (1.5k, 1.001k; then zeros), or sixteenths of a binary unit
# (1.5Gi, 1.25Mi, 1.0625Ki; then zeros). A pattern, not a CEL rule: the API server's quantity
# library calls 1.5Gi not an integer (it keeps it as a decimal), and a regular expression costs
# nothing in the CRD's validation budget. Kept here so the schema and the model share one
# spelling (a test compares them, another that both refuse 1.1Ki, 1126.4 bytes).
_WHOLE_DIGITS: Final = {"k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SIXTEENTHS: Final = "5|25|75|125|375|625|875|0625|1875|3125|4375|5625|6875|8125|9375"
SIZE_PATTERN: Final = (
    r"^[0-9]*[1-9][0-9]*("
    + "|".join(f"(\\.[0-9]{{1,{n}}}0*)?{suffix}" for suffix, n in _WHOLE_DIGITS.items())
    + f"|(\\.(0+|({_SIXTEENTHS})0*))?(Ki|Mi|Gi|Ti|Pi|Ei))?$"
)
DURATION_PATTERN: Final = MANIFEST_PATTERN

# Kubernetes' full quantity grammar (sign, exponent, milli) for parse_quantity.
_QUANTITY_RE: Final = re.compile(
    r"^(?P<num>[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"
)
# What people type from habit (64MB, 1GiB, 10 kb): named in the error, never accepted.
_UNIT_HABIT: Final = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgtpe])(i?)b?\s*$", re.IGNORECASE)


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


def parse_bytes(value: int | str) -> int:
    """Return a size in bytes from an integer or a Kubernetes quantity string; reject negatives."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a size")
    if isinstance(value, int):
        amount = Decimal(value)
    elif isinstance(value, str):
        amount = parse_quantity(value)
    else:
        raise QuantityError(f"{value!r} is not a size (an integer or a quantity string)")
    if amount < 0:
        raise QuantityError(f"{value!r} is negative")
    if amount != amount.to_integral_value():
        raise QuantityError(f"{value!r} is not a whole number of bytes")
    return int(amount)


def parse_size(value: int | str) -> int:
    """A positive size written as the CRDs admit it (``SIZE_PATTERN``): the command line's sizes.

    ``64M`` is 64,000,000 bytes and ``64Mi`` is 67,108,864, as in a manifest; ``64MB``, ``1GiB``
    and other habits are rejected with both readings, so nobody gets the one they did not mean;
    a fraction of a byte (``1.1Ki``) is rejected with what it is.
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise QuantityError(f"{value!r} is not a size")
    text = str(value)
    if re.fullmatch(SIZE_PATTERN[1:-1], text) is None:
        raise QuantityError(_refusal(text))
    return parse_bytes(text)


def _refusal(text: str) -> str:
    """Why ``text`` is not a size, with what to write instead when that is clear."""
    try:
        amount = parse_quantity(text) if _QUANTITY_RE.match(text) else None
    except QuantityError:
        amount = None
    if amount is not None and amount > 0:
        if amount != amount.to_integral_value():
            return f"{text!r} is not a whole number of bytes ({amount.normalize():f})"
        size = int(amount)
        written = format_bytes(size)
        return f"{text!r} is {size:,} bytes in a spelling the CRDs refuse: write {written}"
    return f"{text!r} is not a positive size ({_size_hint(text)})"


def _size_hint(text: str) -> str:
    habit = _UNIT_HABIT.match(text)
    if habit is None:
        return "a Kubernetes quantity such as 128Mi, 1Gi, 500M or a number of bytes"
    number, prefix = habit[1], habit[2]
    decimal_suffix = "k" if prefix.lower() == "k" else prefix.upper()
    binary_suffix = prefix.upper() + "i"
    options = []
    for suffix in (decimal_suffix, binary_suffix):
        spelled = number + suffix
        amount = parse_quantity(spelled)
        if amount <= 0 or amount != amount.to_integral_value():
            continue  # a fraction of a byte: not a reading anyone can write
        size = int(amount)
        if re.fullmatch(SIZE_PATTERN[1:-1], spelled):
            options.append(f"{spelled} = {size:,} bytes")
        else:  # 0.5Ki: whole, but written otherwise
            options.append(f"{format_bytes(size)} for {spelled}")
    if not options:
        return "a whole number of bytes, such as 128Mi, 1Gi, 500M"
    return "write " + " or ".join(options)


def format_bytes(size: int) -> str:
    """Render bytes as the shortest exact binary quantity (``134217728`` -> ``128Mi``)."""
    if size < 0:
        raise QuantityError(f"{size} is negative")
    for suffix, factor in reversed(_BINARY.items()):
        if size and size % factor == 0:
            return f"{size // factor}{suffix}"
    return str(size)


def parse_duration(text: str) -> int:
    """Parse a manifest duration (``30d``, ``720h``, ``1h30m``, ``7 days``) to whole seconds
    (at least one): exactly what ``DURATION_PATTERN``, the CRDs' pattern, admits."""
    try:
        return parse_manifest_seconds(text)
    except DurationError as exc:
        raise QuantityError(str(exc)) from None


def format_duration(seconds: int) -> str:
    """Render seconds in the largest exact unit (``86400`` -> ``1d``, ``5400`` -> ``90m``)."""
    try:
        return format_seconds(seconds)
    except DurationError as exc:
        raise QuantityError(str(exc)) from None
