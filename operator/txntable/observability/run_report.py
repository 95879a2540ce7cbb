"""The engine counters a maintenance run reports in its JSON result line (``engineMetrics``).

A run's process (a Spark driver, a local job) counts its commits with ``EngineMetrics``; the
controller cannot scrape a short-lived pod, so the job puts a summary of those counters into its
result line and the controller adds them to its own ``txntable_run_commit_*`` counters when it
records the finished run. The summary is plain JSON with bounded keys (outcomes, conflict types).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from prometheus_client import Counter

from txntable.api.common import RunKind, RunOutcome
from txntable.engine import OUTCOMES
from txntable.observability.metrics import EngineMetrics

#: key of the summary in a job's result line
RESULT_KEY: Final = "engineMetrics"
KINDS: Final = tuple(k.value for k in RunKind)
RUN_OUTCOMES: Final = ("succeeded", "nothing_to_do", "conflicted", "failed")
_OUTCOME_ALIASES: Final = {
    "succeeded": "succeeded",
    "nothingtodo": "nothing_to_do",
    "nothing_to_do": "nothing_to_do",
    "conflicted": "conflicted",
    "failed": "failed",
}
CONFLICT_TYPES: Final = (
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "MetadataChangedException",
    "ProtocolChangedException",
    "ConcurrentTransactionException",
    "ConcurrentWriteException",
)


def _totals(counter: Counter, by: str | None = None) -> dict[str, int]:
    out: dict[str, int] = {}
    for family in counter.collect():
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            key = sample.labels.get(by, "") if by else ""
            out[key] = out.get(key, 0) + int(sample.value)
    return out


def engine_summary(metrics: EngineMetrics) -> dict[str, Any]:
    """Counters of ``metrics`` summed over tables and operations, for the result line:
    ``{"attempts": n, "retries": n, "commits": {outcome: n}, "conflicts": {type: n}}``."""
    return {
        "attempts": _totals(metrics.attempts).get("", 0),
        "retries": _totals(metrics.retries).get("", 0),
        "commits": _totals(metrics.commits, "outcome"),
        "conflicts": _totals(metrics.conflicts, "conflict_type"),
    }


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def parse_summary(result: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The validated ``engineMetrics`` of a result line, None when absent or malformed.

    Unknown outcomes and conflict types fold into ``other`` so labels stay bounded; negative
    or non-integer counts read as 0.
    """
    raw = result.get(RESULT_KEY) if result else None
    if not isinstance(raw, Mapping):
        return None
    commits: dict[str, int] = {}
    raw_commits = raw.get("commits")
    for outcome, n in raw_commits.items() if isinstance(raw_commits, Mapping) else ():
        key = outcome if outcome in OUTCOMES else "other"
        commits[key] = commits.get(key, 0) + _count(n)
    conflicts: dict[str, int] = {}
    raw_conflicts = raw.get("conflicts")
    for kind, n in raw_conflicts.items() if isinstance(raw_conflicts, Mapping) else ():
        key = kind if kind in CONFLICT_TYPES else "other"
        conflicts[key] = conflicts.get(key, 0) + _count(n)
    return {
        "attempts": _count(raw.get("attempts")),
        "retries": _count(raw.get("retries")),
        "commits": commits,
        "conflicts": conflicts,
    }


def run_outcome_label(outcome: RunOutcome) -> str:
    """``Succeeded``/``NothingToDo``/``Conflicted``/``Failed`` (RunOutcome) to a label value."""
    return _OUTCOME_ALIASES.get(str(outcome).replace(" ", "").lower(), "other")


def kind_label(kind: RunKind | None) -> str:
    return str(kind) if kind in KINDS else "other"


def planning_note(result: Mapping[str, Any] | None) -> str | None:
    """One line for a run's status message about other writers: the partitions conflict-aware
    planning deferred (``deferredPartitions``) and the rewritten bytes the run had to drop
    (``numBytesDropped``); None when neither happened. At most 3 partitions are named."""
    if not result:
        return None
    parts = []
    deferred = result.get("deferredPartitions")
    if isinstance(deferred, list) and deferred:
        named = []
        for entry in deferred[:3]:
            values = entry.get("partitionValues") if isinstance(entry, Mapping) else None
            if isinstance(values, Mapping):
                named.append(",".join(f"{k}={v}" for k, v in values.items()) or "(table)")
        more = f" and {len(deferred) - 3} more" if len(deferred) > 3 else ""
        parts.append(
            f"{len(deferred)} partition(s) deferred, written recently by other writers "
            f"({'; '.join(named)}{more})"
        )
    dropped = nonneg_int(result.get("numBytesDropped"))
    if dropped:
        parts.append(f"{dropped} rewritten bytes dropped: other writers changed the inputs first")
    return "; ".join(parts) or None


def failure_note(result: Mapping[str, Any] | None) -> str | None:
    """What a failed compaction run committed before it failed (its result line), e.g. when
    its VACUUM was refused after the bins were committed; None when it committed nothing."""
    if not result or result.get("vacuumOnly"):
        return None
    bins = nonneg_int(result.get("binsCommitted")) or 0
    removed = nonneg_int(result.get("numFilesRemoved")) or 0
    if not bins and not removed:
        return None
    added = nonneg_int(result.get("numFilesAdded")) or 0
    version = nonneg_int(result.get("version"))
    at = f" at version {version}" if version is not None else ""
    return (
        f"partly done: the compaction committed {bins} bin(s){at} ({removed} files rewritten "
        f"into {added}) before the run failed"
    )


def nonneg_int(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return value if ok else None
