"""What one commit in a table's log says about contention, whoever wrote it.

The controller sees every commit that landed (it reads the log); it never sees the transactions
that gave up. From each ``commitInfo`` it derives bounded labels (operation, engine family) and
how many write attempts the commit lost to other writers before it landed:

- ``txntable``: exact, ``txntableAttempt - 1`` (our engine records the attempt that landed);
- ``delta-rs``: exact, ``operationMetrics.num_retries`` (delta-rs records its retries);
- Spark and anything else: an estimate from ``readVersion``. A Delta writer first tries version
  ``readVersion + 1``; a commit that landed at a higher version therefore lost that first try to
  a concurrent commit and was retried after a conflict check, so it counts as one lost attempt
  (a lower bound: it may have lost up to ``version - readVersion - 1``). Without ``readVersion``
  nothing can be said and the commit's outcome is ``unknown``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

ENGINES: Final = ("txntable", "delta-rs", "spark", "other")
#: outcomes of a landed commit, as far as the log tells
FIRST_ATTEMPT: Final = "first_attempt"
RETRIED: Final = "retried"
UNKNOWN: Final = "unknown"
LOG_OUTCOMES: Final = (FIRST_ATTEMPT, RETRIED, UNKNOWN)
#: operation label for names that are malformed or beyond the distinct-name budget
OTHER_OPERATION: Final = "OTHER"
MAX_OPERATIONS: Final = 50
_OPERATION = re.compile(r"^[A-Z][A-Z0-9 _-]{0,47}$")


@dataclass(frozen=True, slots=True)
class LoggedCommit:
    """The contention facts of one landed commit."""

    version: int
    operation: str  # raw commitInfo.operation (uppercased), bounded later by OperationLabels
    engine: str  # one of ENGINES
    lost_attempts: int  # exact for txntable/delta-rs, lower bound (0 or 1) otherwise
    outcome: str  # one of LOG_OUTCOMES
    exact: bool  # lost_attempts was recorded by the writer, not estimated


def engine_family(info: Mapping[str, Any]) -> str:
    """``txntable``, ``delta-rs``, ``spark`` or ``other`` from engineInfo/clientVersion."""
    text = " ".join(str(info.get(k) or "") for k in ("engineInfo", "clientVersion")).lower()
    if "txntableAttempt" in info or text.startswith("txntable/"):
        return "txntable"
    if "delta-rs" in text:
        return "delta-rs"
    if "apache-spark" in text or "databricks" in text or "delta-lake/" in text:
        return "spark"
    if "clusterId" in info or "notebook" in info:  # Databricks without engineInfo
        return "spark"
    return "other"


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def classify(info: Mapping[str, Any], version: int | None = None) -> LoggedCommit | None:
    """The facts of one commit; ``info`` is a commitInfo dict (``Table.history`` adds
    ``version``). Returns None when the version is unknown (nothing can be counted once)."""
    v = _int(info.get("version")) if version is None else version
    if v is None:
        return None
    engine = engine_family(info)
    operation = str(info.get("operation") or "UNKNOWN").strip().upper()
    recorded: int | None = None
    if engine == "txntable":
        attempt = _int(info.get("txntableAttempt"))
        recorded = attempt - 1 if attempt is not None and attempt >= 1 else None
    elif engine == "delta-rs":
        metrics = info.get("operationMetrics")
        if isinstance(metrics, Mapping):
            recorded = _int(metrics.get("num_retries"))
    if recorded is not None:
        outcome = RETRIED if recorded > 0 else FIRST_ATTEMPT
        return LoggedCommit(v, operation, engine, recorded, outcome, True)
    read_version = _int(info.get("readVersion"))
    if read_version is None:
        return LoggedCommit(v, operation, engine, 0, UNKNOWN, False)
    lost = 1 if v > read_version + 1 else 0
    return LoggedCommit(v, operation, engine, lost, RETRIED if lost else FIRST_ATTEMPT, False)


class OperationLabels:
    """Keeps the ``operation`` label bounded: well-formed names, at most ``limit`` distinct."""

    def __init__(self, limit: int = MAX_OPERATIONS) -> None:
        self.limit = limit
        self._seen: set[str] = set()

    def __call__(self, operation: str) -> str:
        if operation in self._seen:
            return operation
        if not _OPERATION.match(operation) or len(self._seen) >= self.limit:
            return OTHER_OPERATION
        self._seen.add(operation)
        return operation
