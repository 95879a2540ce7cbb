"""Deterministic, valid Kubernetes names and label values for maintenance runs.

A run's name is a pure function of (kind, policy, table, scheduled time, attempt), so a
controller that restarts, or two replicas that race, compute the same name and the second
create gets ``409 AlreadyExists`` and adopts the first run instead of starting another.

Names are DNS-1123 labels of at most ``MAX_RUN_NAME`` (47) characters that start with a
letter: Spark requires executor pod-name prefixes of at most 47 characters (it appends
``-exec-<n>``), the Spark Operator derives ``<name>-driver`` and ``<name>-ui-svc`` (a Service
name must be a DNS-1035 label), and the Job controller appends a 6-character pod suffix.
A short hash of (kind, policy, table) follows the readable part, so runs of distinct
tables or policies never share a name even when the readable part is cut or ambiguous.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Final

from txntable.api.common import RunKind
from txntable.launch.errors import PermanentLaunchError

MAX_RUN_NAME: Final = 47
MAX_LABEL_VALUE: Final = 63
HASH_LEN: Final = 8
NAME_HASH_LEN: Final = 6

DNS_LABEL: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN: Final = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
LABEL_VALUE: Final = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

#: Short forms of the run kinds used in names (full kind is in the ``txntable.io/kind`` label).
KIND_CODES: Final[Mapping[str, str]] = {
    RunKind.OPTIMIZE: "opt",
    RunKind.CHECKPOINT: "ckpt",
    RunKind.VACUUM: "vac",
}


def check_dns_label(value: str, what: str) -> None:
    """Raise ``PermanentLaunchError`` unless ``value`` is a DNS-1123 label (namespaces)."""
    if len(value) > MAX_LABEL_VALUE or not DNS_LABEL.match(value):
        raise PermanentLaunchError(
            f"{what} {value!r} is not a DNS-1123 label", reason="InvalidName"
        )


def check_dns_subdomain(value: str, what: str) -> None:
    """Raise ``PermanentLaunchError`` unless ``value`` is a DNS-1123 subdomain (object names)."""
    if len(value) > 253 or not DNS_SUBDOMAIN.match(value):
        raise PermanentLaunchError(
            f"{what} {value!r} is not a DNS-1123 subdomain", reason="InvalidName"
        )


def short_hash(*parts: str) -> str:
    """A stable 8-hex-digit digest of ``parts`` (NUL-separated, so ("ab","c") != ("a","bc"))."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:HASH_LEN]


def stamp(moment: datetime) -> str:
    """``moment`` in UTC as ``YYYYMMDDtHHMMSS``; naive datetimes are refused (ambiguous)."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise PermanentLaunchError(
            "scheduled time must carry a time zone", reason="InvalidScheduledTime"
        )
    return moment.astimezone(UTC).strftime("%Y%m%dt%H%M%S")


def run_name(kind: str, policy: str, table: str, scheduled_time: datetime, attempt: int = 0) -> str:
    """The run's deterministic name, e.g. ``opt-sales-nightly-3aba13-20261122t020000`` (+ ``-r2``).

    ``kind`` is ``optimize``, ``checkpoint`` or ``vacuum``; ``policy`` and ``table`` are object
    names. The readable part may be cut or altered (dots, length); the hash of (kind, policy,
    table) always follows it, because names may hold dashes: table ``a-b`` with policy ``p``
    and table ``a`` with policy ``b-p`` read the same.
    """
    if kind not in KIND_CODES:
        raise PermanentLaunchError(f"unknown run kind {kind!r}", reason="InvalidRun")
    if attempt < 0:
        raise PermanentLaunchError("attempt must be >= 0", reason="InvalidRun")
    code = KIND_CODES[kind]
    tail = stamp(scheduled_time) + (f"-r{attempt}" if attempt else "")
    readable = re.sub(r"[^a-z0-9-]+", "-", f"{table}-{policy}".lower())
    readable = re.sub(r"-{2,}", "-", readable).strip("-")
    digest = short_hash(kind, policy, table)[:NAME_HASH_LEN]
    room = MAX_RUN_NAME - len(code) - len(tail) - len(digest) - 3
    cut = readable[: max(room, 0)].rstrip("-")
    return "-".join(p for p in (code, cut, digest, tail) if p)


def attempt_of(name: str) -> int:
    """The attempt a run name carries (its ``-rN`` suffix; 0 without one)."""
    found = re.search(r"-r([0-9]+)$", name)
    return int(found.group(1)) if found else 0


def label_value(value: str) -> str:
    """``value`` as a valid label value: itself when it fits, else truncated plus a hash."""
    if len(value) <= MAX_LABEL_VALUE and LABEL_VALUE.match(value):
        return value
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", value)
    cut = cleaned[: MAX_LABEL_VALUE - HASH_LEN - 1].strip("-_.")
    return f"{cut}-{short_hash(value)}" if cut else short_hash(value)
