"""Observing a table's log: its handle and summary kept between ticks, its health each tick.

The controller keeps a compact ``engine.read.summary.TableSummary`` per table, never a snapshot
(a few bytes per file; one listing plus the new commits per tick), in the table's memory
(``Observed``, ``controller.memory``). The first observation loads the summary from the log; later
ones advance it. A table that does not exist is created when its spec says how. A log that
cannot be read becomes a ``Failure`` the status reports; a storage failure or a corrupt log
reopens the table at the next tick (a fresh client, the log read again from scratch).

It lives apart from the tick (``controller.tick``) because it is the only part that reads the
table's storage every tick, and the only one that holds memory in proportion to the table.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from txntable.api.conditions import Reason
from txntable.api.types import CompactionPolicy, TxnTable
from txntable.controller.memory import TableMemories
from txntable.engine import (
    CommitOptions,
    CorruptLogError,
    EngineError,
    Storage,
    StorageError,
    Table,
    TableNotFoundError,
    TableSummary,
    UnsupportedFeatureError,
    to_arrow_type,
)
from txntable.observability.metrics import EngineMetrics
from txntable.reconcile.health import TableHealth, observe_summary, swept_before, without_swept
from txntable.reconcile.status import Failure

log = logging.getLogger(__name__)

#: Full table loads (a first observation, or a summary that cannot be advanced) at once: each
#: peaks at ~140 MB above the summary it leaves for a 100,000-file table, and Kopf runs several
#: reconciles in threads, so a controller starting with many big tables would add them up.
FULL_LOADS_AT_ONCE = 2


@dataclass
class Observed:
    """One table's sub-record of observation (``controller.memory``): its handle (holding no
    snapshot) and the summary of its log."""

    table: Table | None = None
    summary: TableSummary | None = None


@dataclass
class Observer:
    """Opens tables and keeps their summaries current, in the tables' memories."""

    memories: TableMemories
    engine_metrics: EngineMetrics | None = None
    _full_loads: threading.Semaphore = field(
        default_factory=lambda: threading.Semaphore(FULL_LOADS_AT_ONCE)
    )

    def summary(self, key: str) -> TableSummary | None:
        """The table's summary as the last observation left it."""
        observed = self.memories.peek(key, Observed)
        return observed.summary if observed is not None else None

    def reopen(self, key: str) -> None:
        """Open the table again at the next tick, with a fresh storage client, and read its log
        again from scratch; nothing else kept of the table is dropped."""
        observed = self.memories.peek(key, Observed)
        if observed is not None:
            observed.table = observed.summary = None

    def observe(
        self, key: str, table: TxnTable, options: Mapping[str, str], min_file_size: int
    ) -> tuple[Table | None, TableHealth | None, Failure | None]:
        """The table's handle and health now, or why its log cannot be read."""
        observed = self.memories.of(key, Observed)
        try:
            engine_table = self._open(observed, table, options)
            known = observed.summary
            summary = (
                known.advance(engine_table.storage, reload=self._load_summary)
                if known is not None
                else self._load_summary(engine_table.storage)
            )
            observed.summary = summary
        except TableNotFoundError as exc:
            return None, None, Failure(Reason.TABLE_NOT_FOUND, str(exc))
        except StorageError as exc:
            self.reopen(key)
            return None, None, Failure(Reason.STORAGE_UNREACHABLE, str(exc))
        except UnsupportedFeatureError as exc:
            return None, None, Failure(Reason.UNSUPPORTED_PROTOCOL, str(exc))
        except CorruptLogError as exc:
            self.reopen(key)
            return None, None, Failure(Reason.CORRUPT_LOG, str(exc))
        except EngineError as exc:
            return None, None, Failure(Reason.STORAGE_UNREACHABLE, str(exc))
        return engine_table, observe_summary(summary, min_file_size), None

    def unswept(
        self,
        key: str,
        health: TableHealth,
        policy: CompactionPolicy | None,
        vacuum_time: datetime,
    ) -> TableHealth:
        """``health`` without the bytes the VACUUM begun at ``vacuum_time`` deleted (their
        tombstones stay in the log until a checkpoint). A dry-run policy deleted nothing."""
        vacuum = policy.spec.vacuum if policy is not None else None
        summary = self.summary(key)
        if summary is None or (vacuum is not None and vacuum.dry_run):
            return health
        retention = vacuum.retention if vacuum is not None else None
        cutoff = swept_before(health.file_retention_ms, retention, vacuum_time)
        return health if cutoff is None else without_swept(health, summary, cutoff)

    def _open(self, observed: Observed, table: TxnTable, options: Mapping[str, str]) -> Table:
        cached = observed.table
        if cached is not None:
            return cached
        try:
            opened = Table.open(table.spec.location, options)
        except TableNotFoundError:
            create = table.spec.create
            if create is None:
                raise
            import pyarrow as pa

            schema = pa.schema(
                [pa.field(c.name, to_arrow_type(c.type), c.nullable) for c in create.columns]
            )
            ns = table.metadata.namespace or "default"
            opened = Table.create(
                table.spec.location,
                schema,
                create.partition_columns,
                dict(create.properties),
                storage_options=options,
                name=table.metadata.name,
                options=CommitOptions(
                    table_name=f"{ns}/{table.metadata.name}", observer=self.engine_metrics
                ),
            )
            log.info("created table", extra={"table": table.metadata.name})
            opened = Table(opened.storage)  # without the snapshot creating it left behind
        observed.table = opened
        return opened

    def _load_summary(self, storage: Storage) -> TableSummary:
        with self._full_loads:
            return TableSummary.load(storage)
