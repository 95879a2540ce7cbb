"""OPTIMIZE's bin-packing rules on file sizes: the one kernel behind both plans.

Two callers plan a compaction: the run's planner (``planner.plan_optimize``), from a snapshot's
files with their paths and statistics, and the controller's plan shown in status
(``reconcile.plan``), from the few columns a ``TableSummary`` keeps. Both pack with the
functions here, so what the status promises and what the run does cannot drift apart:

* partitions are planned in ``partition_order`` (null first, then by value);
* ``pack_partition``: the files under the minimum size, plus those due a deletion-vector purge,
  packed first-fit-decreasing (size descending, ties in the order the caller gives) into bins
  of at most the target size and at most ``max_files_per_bin`` files; a partition with fewer
  than two files and nothing to purge, or with fewer candidates than ``min_input_files`` and
  nothing to purge, yields no bin; a bin is kept with ``min_input_files`` files or more, or
  with a file to purge;
* ``bins_within``: a run takes the bins in plan order while their bytes fit ``max_bytes``,
  at least one; the rest are deferred to a later run.

Z-order and clustered tables plan one bin per partition and do not pack (``planner``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

PartitionKey = tuple[str | None, ...]


class PackingRules(Protocol):
    """The policy's figures packing reads (``api.optimize_options.OptimizeOptions`` has them)."""

    @property
    def target_file_size(self) -> int: ...

    @property
    def effective_min_file_size(self) -> int: ...

    @property
    def min_input_files(self) -> int: ...

    @property
    def max_files_per_bin(self) -> int | None: ...


def partition_order(key: PartitionKey) -> tuple[tuple[int, str], ...]:
    """Sort key of partitions in plan order: a null value before any string."""
    return tuple((0, "") if v is None else (1, v) for v in key)


def pack_partition(
    sizes: Sequence[int],
    rules: PackingRules,
    *,
    purge: Sequence[bool] | None = None,
    ties: Sequence[str] | None = None,
) -> list[list[int]]:
    """The bins of one partition's files, each a list of indices into ``sizes`` in packing
    order, the bins in plan order. ``purge[i]``: file ``i`` is rewritten whatever its size (its
    deletion vector hides enough rows); ``ties[i]``: the name that orders files of equal size
    (the planner's paths, so its plan is deterministic); without it equal sizes keep the order
    given, which changes nothing for callers that only count sizes."""
    if len(sizes) < 2 and not (purge and any(purge)):
        return []  # one file is as good as it gets
    limit = rules.effective_min_file_size
    if purge is None:
        candidates = [i for i, size in enumerate(sizes) if size < limit]
    else:
        candidates = [i for i, size in enumerate(sizes) if size < limit or purge[i]]
    purging = purge is not None and any(purge[i] for i in candidates)
    if len(candidates) < rules.min_input_files and not purging:
        return []
    if ties is None:  # a reversed sort is stable too: equal sizes keep the order given
        candidates.sort(key=sizes.__getitem__, reverse=True)
    else:
        candidates.sort(key=lambda i: (-sizes[i], ties[i]))
    target, most = rules.target_file_size, rules.max_files_per_bin
    packed: list[list[int]] = []
    rooms: list[int] = []  # bytes each bin can still take (one comparison per bin tried)
    for i in candidates:
        size = sizes[i]
        for b, room in enumerate(rooms):
            if size <= room:
                packed[b].append(i)
                rooms[b] = room - size
                break
        else:
            packed.append([i])
            rooms.append(target - size)
            b = len(packed) - 1
        if most is not None and len(packed[b]) >= most:
            rooms[b] = -1  # full by count: no file, not even an empty one, fits
    minimum = rules.min_input_files
    if purge is None or not purging:
        return [members for members in packed if len(members) >= minimum]
    return [m for m in packed if len(m) >= minimum or any(purge[i] for i in m)]


def bins_within(bin_bytes: Sequence[int], max_bytes: int | None) -> int:
    """How many of the bins (their input bytes, in plan order) one run takes: while their
    total fits ``max_bytes``, at least one; all of them without a limit."""
    if max_bytes is None:
        return len(bin_bytes)
    total = 0
    for i, size in enumerate(bin_bytes):
        if i > 0 and total + size > max_bytes:
            return i
        total += size
    return len(bin_bytes)
