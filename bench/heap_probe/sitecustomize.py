"""What a benchmarked controller's heap holds, asked from outside (``scale_apiserver --heap``).

Put on a process's ``PYTHONPATH`` with ``TXNTABLE_HEAP_REPORT`` naming a file: Python imports
this module at start-up, starts ``tracemalloc`` (one frame per allocation unless
``TXNTABLE_HEAP_FRAMES`` says more, so the overhead stays small) and, on SIGUSR2, appends to that
file the allocation sites holding the most memory, who called the JSON decoding that holds
memory, the object types holding the most (shallow sizes, from the garbage collector's view),
the Kubernetes objects held, and pyarrow's allocated bytes. Not part of the product: nothing
in ``operator/`` imports it.
"""

from __future__ import annotations

import collections
import gc
import os
import signal
import sys
import tracemalloc

REPORT = os.environ.get("TXNTABLE_HEAP_REPORT")
TOP = 40


def _report(signum: int, frame: object) -> None:
    del signum, frame
    assert REPORT is not None
    lines = [f"=== heap report, pid {os.getpid()}"]
    traced, peak = tracemalloc.get_traced_memory()
    lines.append(f"tracemalloc: {traced / 2**20:.1f} MB traced, peak {peak / 2**20:.1f} MB")
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)]
    )
    for stat in snapshot.statistics("lineno")[:TOP]:
        frame0 = stat.traceback[0]
        lines.append(
            f"{stat.size / 2**20:8.2f} MB {stat.count:9d} {frame0.filename}:{frame0.lineno}"
        )
    lines.extend(_callers(snapshot, f"{os.sep}json{os.sep}"))
    sizes: collections.Counter[str] = collections.Counter()
    counts: collections.Counter[str] = collections.Counter()
    for obj in gc.get_objects():
        name = type(obj).__qualname__
        sizes[name] += sys.getsizeof(obj)
        counts[name] += 1
    lines.append("--- gc-tracked objects by type (shallow)")
    for name, size in sizes.most_common(TOP):
        lines.append(f"{size / 2**20:8.2f} MB {counts[name]:9d} {name}")
    lines.extend(_api_objects())
    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is not None:
        lines.append(f"pyarrow allocated: {pyarrow.total_allocated_bytes() / 2**20:.1f} MB")
    with open(REPORT, "a") as out:
        out.write("\n".join(lines) + "\n")


def _callers(snapshot: tracemalloc.Snapshot, inside: str) -> list[str]:
    """Of the memory allocated in files whose path contains ``inside`` (JSON decoding), how
    much each caller outside them holds (needs ``TXNTABLE_HEAP_FRAMES`` > 1)."""
    held: collections.Counter[str] = collections.Counter()
    for stat in snapshot.statistics("traceback"):
        frames = list(stat.traceback)
        if not frames or inside not in frames[0].filename:
            continue
        caller = next((f for f in frames if inside not in f.filename), frames[-1])
        held[f"{caller.filename}:{caller.lineno}"] += stat.size
    lines = [f"--- allocated in *{inside}*, by the first caller outside"]
    lines += [f"{size / 2**20:8.2f} MB {where}" for where, size in held.most_common(TOP // 2)]
    return lines


def _api_objects() -> list[str]:
    """The Kubernetes objects held (dicts with kind and metadata), by kind: how many, their
    JSON size, how much of it is managedFields, and what holds a few of them."""
    import json

    found: dict[str, list[dict[str, object]]] = collections.defaultdict(list)
    for obj in gc.get_objects():
        if isinstance(obj, dict) and "kind" in obj and "metadata" in obj:
            found[str(obj.get("kind"))].append(obj)
    lines = ["--- Kubernetes objects held, by kind"]
    for kind, objs in sorted(found.items(), key=lambda kv: -len(kv[1])):
        sizes = [len(json.dumps(o, default=str)) for o in objs]
        managed = [
            len(json.dumps((o.get("metadata") or {}).get("managedFields"), default=str))
            for o in objs
            if isinstance(o.get("metadata"), dict)
        ]
        distinct = len({id(o.get("metadata")) for o in objs})
        holders: collections.Counter[str] = collections.Counter()
        for o in objs[:20]:
            for ref in gc.get_referrers(o):
                holders[type(ref).__qualname__] += 1
        lines.append(
            f"{kind}: {len(objs)} dicts ({distinct} distinct metadata), "
            f"JSON {sum(sizes) / 2**20:.1f} MB"
            f" (mean {sum(sizes) // max(1, len(sizes))} B, managedFields mean "
            f"{sum(managed) // max(1, len(managed))} B); held by {dict(holders.most_common(6))}"
        )
    return lines


if REPORT:
    tracemalloc.start(int(os.environ.get("TXNTABLE_HEAP_FRAMES", "1")))
    signal.signal(signal.SIGUSR2, _report)
