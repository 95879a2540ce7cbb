"""Post-commit hooks: checkpoint every ``delta.checkpointInterval`` commits, then clean the log.

Delta Spark checkpoints after commit ``v`` when ``v != 0 and v % checkpointInterval == 0``
(default 10) and then runs metadata cleanup when ``delta.enableExpiredLogCleanup`` is true
(PROTOCOL.md "Checkpoints", "Metadata Cleanup"; the cadence is Delta Spark's). The hook is opt-in: a
writer passes it in ``CommitOptions.post_commit_hooks``; tables whose checkpoints the operator
manages leave it out. A failing checkpoint never undoes the commit: it is logged and the next
interval tries again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from txntable.engine.checkpoint import retention
from txntable.engine.checkpoint.cleanup import cleanup_expired_logs
from txntable.engine.checkpoint.write import write_checkpoint
from txntable.engine.errors import EngineError

if TYPE_CHECKING:
    from txntable.engine.read.handle import TableHandle

log = logging.getLogger(__name__)


class Committed(Protocol):
    """What the hook needs of a commit result (``transaction.CommitResult`` has it)."""

    @property
    def version(self) -> int: ...


def should_checkpoint(version: int, interval: int) -> bool:
    return version != 0 and version % interval == 0


def checkpoint_hook(table: TableHandle, result: Committed) -> None:
    """Checkpoint at ``result.version`` when the table's interval says so, then clean up."""
    version = result.version
    try:
        snapshot = table.snapshot()
        if snapshot.version != version:
            snapshot = table.snapshot(version=version)
        config = snapshot.configuration
        if not should_checkpoint(version, retention.checkpoint_interval(config)):
            return
        written = write_checkpoint(snapshot)
        log.info(
            "checkpoint of %s at version %d: %d actions in %.2fs",
            table.uri,
            version,
            written.size,
            written.seconds,
        )
        if retention.bool_property(config, retention.EXPIRED_LOG_CLEANUP, True):
            cleanup_expired_logs(table.snapshot())
    except EngineError as exc:
        log.warning("checkpoint after version %d of %s failed: %s", version, table.uri, exc)
