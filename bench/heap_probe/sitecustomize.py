"""What a benchmarked controller's heap holds, asked from outside (``scale_apiserver --heap``).

Put on a process's ``PYTHONPATH`` with ``TXNTABLE_HEAP_REPORT`` naming a file: Python imports
this module at start-up, starts ``tracemalloc`` (one frame per allocation unless
``TXNTABLE_HEAP_FRAMES`` says more, so the overhead stays small) and, on SIGUSR2, appends to that
file the allocation sites holding the most memory, who called the JSON decoding that holds
memory, the object types holding the most (shallow sizes, from the garbage collector's view),
the Kubernetes objects held and the chains of objects that hold them, and pyarrow's allocated
bytes. ``TXNTABLE_HEAP_FRAMES=0`` leaves ``tracemalloc`` off: the object census and the holder
chains need none, and the controller then runs at its usual speed. Not part of the product:
nothing in ``operator/`` imports it.
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
    if tracemalloc.is_tracing():
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
        lines.extend(_holder_chains(objs, ignore={id(found), id(objs)}))
    return lines


def _holder_chains(objs: list[dict[str, object]], ignore: set[int], sample: int = 40) -> list[str]:
    """Who holds a sample of ``objs``: each object's chains of referrers, up to a few steps,
    each step named by the holder's type and the key or attribute it holds the child under;
    counted over the sample, most frequent first."""
    chains: collections.Counter[str] = collections.Counter()
    step = max(1, len(objs) // sample)
    picked = objs[::step][:sample]
    for obj in picked:
        for chain in _chains(obj, ignore | {id(objs), id(picked)}, depth=6):
            chains[" <- ".join(chain)] += 1
    return [f"    {count:4d}x {chain}" for chain, count in chains.most_common(TOP // 2)]


def _chains(obj: object, ignore: set[int], depth: int) -> list[list[str]]:
    """``ignore`` is shared down the recursion: every list of referrers made here joins it, so
    the probe's own lists are never taken for holders."""
    if depth == 0:
        return [["..."]]
    parents = gc.get_referrers(obj)
    ignore.add(id(parents))
    parents = [p for p in parents if id(p) not in ignore and type(p).__name__ != "frame"]
    ignore.add(id(parents))
    if not parents:
        return [["(no holder)"]]
    out = []
    for i in range(min(3, len(parents))):  # no slice: a slice would hold the parent too
        parent = parents[i]
        edge = _edge(parent, obj)
        if edge.startswith(("module ", "class ")):
            out.append([edge])
            continue
        for rest in _chains(parent, ignore, depth - 1):
            out.append([edge, *rest])
    return out


def _edge(parent: object, child: object) -> str:
    """``parent``'s type and where in it ``child`` sits."""
    import types

    if isinstance(parent, types.ModuleType):
        return f"module {parent.__name__}"
    if isinstance(parent, type):
        return f"class {parent.__qualname__}"
    if isinstance(parent, dict) and "__name__" in parent and "__builtins__" in parent:
        name = next((k for k, v in parent.items() if v is child), "?")
        return f"module {parent['__name__']}.{name}"
    if isinstance(parent, dict):
        for key, value in parent.items():
            if value is child:
                shown = key if isinstance(key, str) and len(key) <= 24 and "/" not in key else "*"
                return f"dict[{shown}]"
        return "dict(key)"
    return type(parent).__qualname__


if REPORT:
    frames = int(os.environ.get("TXNTABLE_HEAP_FRAMES", "1"))
    if frames > 0:
        tracemalloc.start(frames)
    signal.signal(signal.SIGUSR2, _report)
