"""The ``commitInfo`` line a transaction writes first in every commit file.

Other engines and people read it: Spark's history and WriteSerializable check (``isBlindAppend``),
the controller (``txntableRunId`` ties a commit to a maintenance run), lost-response detection
(``txnId``). Fields follow Spark's ``CommitInfo`` (PROTOCOL.md "Commit Provenance Information"
leaves them free); ``operationMetrics`` values are strings as Spark writes them. Two members change
per attempt: ``txntableAttempt`` (the attempt that wrote the line) and, with In-Commit Timestamps,
``inCommitTimestamp``, which must stay greater than every earlier commit's, including winners that
landed meanwhile (the ``inCommitTimestamp`` feature needs them increasing); a commit that turns
ICT on also writes the enablement version and timestamp into its metadata.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from txntable.engine.errors import InvalidArgumentError
from txntable.engine.model.actions import Action, CommitInfo, Metadata

if TYPE_CHECKING:
    from txntable.engine.commit.conflicts import WinningCommit

ICT_ENABLEMENT_VERSION = "delta.inCommitTimestampEnablementVersion"
ICT_ENABLEMENT_TIMESTAMP = "delta.inCommitTimestampEnablementTimestamp"

#: Members the transaction owns; extra members given by callers may not replace them.
RESERVED = frozenset(
    {
        "timestamp",
        "inCommitTimestamp",
        "operation",
        "operationParameters",
        "operationMetrics",
        "readVersion",
        "isolationLevel",
        "isBlindAppend",
        "engineInfo",
        "txnId",
        "txntableAttempt",
        "txntableRunId",
        "version",
    }
)


def engine_info() -> str:
    """``txntable/<version>`` of the installed distribution."""
    import importlib.metadata  # here: slow to import, and a process that only reads needs none

    try:
        version = importlib.metadata.version("txntable")
    except importlib.metadata.PackageNotFoundError:  # running from a source tree
        version = "0+unknown"
    return f"txntable/{version}"


def _metric_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass
class CommitInfoBuilder:
    """Builds the commitInfo of each attempt of one commit."""

    operation: str
    parameters: dict[str, Any]
    metrics: dict[str, Any]
    read_version: int  # -1 for a new table: readVersion is then omitted
    isolation_level: str
    is_blind_append: bool
    txn_id: str
    now_ms: int
    run_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    ict_enabled: bool = False
    previous_timestamp_ms: int | None = None  # the read snapshot's timestamp (ICT when enabled)
    ict_enabling: bool = False  # this commit turns ICT on for an existing table

    def __post_init__(self) -> None:
        if not self.operation or not isinstance(self.operation, str):
            raise InvalidArgumentError("a commit needs an operation name")
        clash = sorted(RESERVED & set(self.extra))
        if clash:
            raise InvalidArgumentError(
                f"commit_info members {clash} are written by the transaction itself"
            )
        self.in_commit_timestamp = self.now_ms
        if self.ict_enabled and self.previous_timestamp_ms is not None:
            self.in_commit_timestamp = max(self.now_ms, self.previous_timestamp_ms + 1)

    def observe_winner(self, winner: WinningCommit) -> None:
        """Keep the in-commit timestamp after a commit that won the race."""
        if not self.ict_enabled:
            return
        info = winner.commit_info
        theirs = info.in_commit_timestamp if info else None
        if theirs is None:
            theirs = winner.file_mtime_ms
        self.in_commit_timestamp = max(self.in_commit_timestamp, theirs + 1)

    def commit_actions(self, version: int, attempt: int, actions: Sequence[Action]) -> list[Action]:
        """The full commit for an attempt at ``version``: commitInfo first, then ``actions``.

        When this commit enables In-Commit Timestamps, its metadata records the enablement
        version and timestamp (they depend on the version that lands, so per attempt).
        """
        out: list[Action] = [self.build(attempt)]
        for action in actions:
            if self.ict_enabling and isinstance(action, Metadata):
                config = dict(action.configuration)
                config[ICT_ENABLEMENT_VERSION] = str(version)
                config[ICT_ENABLEMENT_TIMESTAMP] = str(self.in_commit_timestamp)
                action = replace(action, configuration=config)
            out.append(action)
        return out

    def build(self, attempt: int) -> CommitInfo:
        data: dict[str, Any] = {"timestamp": self.now_ms}
        if self.ict_enabled:
            data["inCommitTimestamp"] = self.in_commit_timestamp
        data["operation"] = self.operation
        data["operationParameters"] = dict(self.parameters)
        if self.read_version >= 0:
            data["readVersion"] = self.read_version
        data["isolationLevel"] = self.isolation_level
        data["isBlindAppend"] = self.is_blind_append
        if self.metrics:
            data["operationMetrics"] = {k: _metric_string(v) for k, v in self.metrics.items()}
        data["engineInfo"] = engine_info()
        data["txnId"] = self.txn_id
        data["txntableAttempt"] = attempt
        if self.run_id is not None:
            data["txntableRunId"] = self.run_id
        data.update(self.extra)
        return CommitInfo(data)
