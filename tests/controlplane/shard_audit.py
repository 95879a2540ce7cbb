"""Who wrote what to each table, from the API server's audit log: the proof that replicas
splitting tables into shards (``txntable.handlers.shards``) never maintain one table at once.

The replicas share one ServiceAccount; each sends its identity in its User-Agent
(``txntable (<pod>)``), which the audit log records. For each table this reads the status writes
the server accepted and the runs it created (201), with the replica that made them, and finds
the tables where two replicas' windows (first to last write of each) overlap. Used by
``tests/controlplane/test_shards.py`` and ``bench/shards_apiserver.py``.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

AGENT = re.compile(r"^txntable \((?P<pod>[^)]+)\)")
RUN_RESOURCES = ("jobs", "sparkapplications")


@dataclass(frozen=True, order=True)
class Write:
    """One accepted write of a replica's about one table."""

    at: dt.datetime
    replica: str
    what: str  # "status" or "create <run name>"


def replica_of(event: dict[str, Any]) -> str | None:
    """The pod name a txntable replica put in its User-Agent, None for anyone else."""
    match = AGENT.match(str(event.get("userAgent") or ""))
    return match["pod"] if match else None


def events(path: Path, user: str) -> Iterator[dict[str, Any]]:
    """The audit events of ``user``, read line by line (the log can be hundreds of MB)."""
    needle = user.encode()
    with path.open("rb") as f:
        for line in f:
            if needle in line:
                event = json.loads(line)
                if event.get("user", {}).get("username") == user:
                    yield event


def writes(
    audit: Iterable[dict[str, Any]], namespace: str, run_tables: dict[str, str]
) -> dict[str, list[Write]]:
    """Each table's accepted writes in ``namespace``, oldest first: its status patches (200)
    and the runs created for it (201; ``run_tables`` maps a run's name to its table)."""
    out: dict[str, list[Write]] = defaultdict(list)
    seen: set[str] = set()
    for event in audit:
        ref = event.get("objectRef") or {}
        if ref.get("namespace") != namespace or event.get("stage") != "ResponseComplete":
            continue
        if event["auditID"] in seen:
            continue
        seen.add(event["auditID"])
        replica = replica_of(event)
        code = int((event.get("responseStatus") or {}).get("code") or 0)
        at = dt.datetime.fromisoformat(str(event["requestReceivedTimestamp"]))
        resource, sub, verb = ref.get("resource"), ref.get("subresource") or "", event["verb"]
        name = str(ref.get("name") or "")
        if resource == "txntables" and sub == "status" and verb == "patch" and code == 200:
            out[name].append(Write(at, replica or "?", "status"))
        elif resource in RUN_RESOURCES and verb == "create" and code == 201:
            table = run_tables.get(name, "?")
            out[table].append(Write(at, replica or "?", f"create {name}"))
    for table in out.values():
        table.sort()
    return dict(out)


def overlaps(by_table: dict[str, list[Write]]) -> dict[str, list[tuple[str, str]]]:
    """The tables where two replicas' windows of writes overlap: [first, last] of each
    replica's writes must be disjoint (a table moves from one replica to another, never
    back and forth while both are alive)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for table, found in by_table.items():
        windows: dict[str, tuple[dt.datetime, dt.datetime]] = {}
        for w in found:
            first, _ = windows.get(w.replica, (w.at, w.at))
            windows[w.replica] = (first, w.at)
        ordered = sorted(windows.items(), key=lambda kv: kv[1][0])
        clashes = [
            (a, b)
            for (a, (_, a_last)), (b, (b_first, _)) in itertools.pairwise(ordered)
            if b_first <= a_last
        ]
        if clashes:
            out[table] = clashes
    return out


def launched_twice(by_table: dict[str, list[Write]]) -> dict[str, list[str]]:
    """Tables with more than one run created (201) for one run name, or by two replicas."""
    out = {}
    for table, found in by_table.items():
        creates = [w for w in found if w.what.startswith("create ")]
        names = [w.what for w in creates]
        if len(set(names)) != len(names) or len({w.replica for w in creates}) > 1:
            out[table] = [f"{w.replica}: {w.what}" for w in creates]
    return out
