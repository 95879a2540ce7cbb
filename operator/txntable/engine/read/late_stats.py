"""Statistics read when asked: where a snapshot's unread statistics are, and reading them in.

Most of a checkpoint's bytes, and most of a loaded snapshot's memory, are its files' ``stats``
JSON. A snapshot loaded without them keeps a ``LateStats`` saying which of its leading rows
came from which checkpoint, and ``fill_stats`` reads just those columns from that checkpoint
and matches them to the rows by reconciliation key. It lives apart from ``snapshot`` because it
is one concern (which rows, from where, and what a rewritten or deleted checkpoint means for
them) that the snapshot only hands its state to.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc

from txntable.engine.errors import CorruptLogError, LogFileGoneError
from txntable.engine.read.checkpoint_read import read_checkpoint_stats
from txntable.engine.read.segment import CheckpointRef
from txntable.engine.read.state import Prefix, TableState, key_column
from txntable.engine.storage.base import Storage


@dataclass(frozen=True)
class LateStats:
    """Where the statistics and tags of a snapshot's leading ``rows`` (of its files and of its
    tombstones) are: in ``checkpoint``, not read yet."""

    checkpoint: CheckpointRef
    rows: Prefix


def fill_stats(storage: Storage, state: TableState, late: LateStats) -> TableState:
    """``state`` with the statistics and tags of its leading ``late.rows`` read from the
    checkpoint they came from, matched by reconciliation key."""
    try:
        adds, removes = read_checkpoint_stats(storage, late.checkpoint)
    except FileNotFoundError as exc:
        raise LogFileGoneError(
            f"the checkpoint at version {late.checkpoint.version} of {storage.root_uri} was "
            f"deleted (log cleanup) before this snapshot read its files' statistics from it; "
            f"load the table again: {exc}"
        ) from exc
    files_rows, tomb_rows = late.rows
    return replace(
        state,
        files=_filled(state.files, files_rows, adds, late.checkpoint.version),
        tombstones=_filled(state.tombstones, tomb_rows, removes, late.checkpoint.version),
    )


def _filled(table: pa.Table, rows: int, source: pa.Table, version: int) -> pa.Table:
    """``table`` with ``stats`` and ``tags`` of its first ``rows`` rows taken from ``source``
    (``checkpoint_read.STATS_SCHEMA`` rows) by key."""
    if rows == 0:
        return table
    at = pc.index_in(key_column(table.slice(0, rows)), value_set=key_column(source))
    if at.null_count:
        raise CorruptLogError(
            f"the checkpoint at version {version} no longer holds {at.null_count} of the files "
            "this snapshot read from it: it was rewritten with other content"
        )
    for name in ("stats", "tags"):
        head = source.column(name).take(at)
        rest = table.column(name).slice(rows)
        column = pa.chunked_array([*head.chunks, *rest.chunks], type=head.type)
        table = table.set_column(table.schema.get_field_index(name), name, column)
    return table
