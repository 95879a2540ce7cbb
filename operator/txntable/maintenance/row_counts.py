"""Row counts of data files whose ``add`` has no ``numRecords``, read from their Parquet footers.

OPTIMIZE purges a deletion vector that hides at least the policy's share of its file's rows, and
guards every bin by the rows its inputs hold; both need each file's physical row count. Delta's
``numRecords`` statistic is optional: a table written with statistics off, or whose checkpoint
was written without them (``delta.checkpoint.writeStatsAsJson=false`` with
``writeStatsAsStruct=false``: the adds loaded from it carry none), has files with vectors but no
count. The Parquet footer always has one (``FileMetaData.num_rows``), and it is read alone
(``engine.read.data_files.read_footer``: the file's last bytes, one ranged request on an object
store), for the files with vectors that lack the statistic only, several at a time.

A footer that cannot be read leaves its file without a count, as before: the file is compacted by
its size only, and a rewrite that reads it fails with the reason. The planner names those files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from txntable.engine.read.data_files import read_footer
from txntable.engine.storage.base import Storage

#: footers read at once (each is one request on an object store)
FOOTER_WORKERS = 8


@dataclass(frozen=True)
class FooterCounts:
    """Physical rows by raw log path, and the paths whose footer could not be read (why)."""

    rows: dict[str, int] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)


def footer_row_counts(
    storage: Storage, paths: Sequence[str], storage_options: Mapping[str, Any] | None = None
) -> FooterCounts:
    """The rows of each file in ``paths`` (raw ``add`` paths) from its Parquet footer."""
    out = FooterCounts()
    if not paths:
        return out

    def one(path: str) -> tuple[str, int | None, str]:
        try:
            return path, read_footer(storage, path, storage_options).num_rows, ""
        except Exception as exc:  # any failure: the file keeps no count
            return path, None, f"{type(exc).__name__}: {exc}"

    with ThreadPoolExecutor(max_workers=min(FOOTER_WORKERS, len(paths))) as pool:
        for path, rows, error in pool.map(one, paths):
            if rows is None:
                out.unreadable[path] = error
            else:
                out.rows[path] = rows
    return out
