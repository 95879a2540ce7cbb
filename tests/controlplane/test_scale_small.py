"""Three hundred tables on one replica on the real API server: the counts of issue 30.2 at
a size ``make test`` affords (``bench/scale_apiserver.py`` takes the times, at 10,000).

A release of its own (the Job backend, a 5 s interval), 300 TxnTables under 20 policies, three
of them fragmented with runs that stay in flight (no Job controller runs here). Checked from
the API server's audit log and the controller's /metrics, counts only:

- every table Ready, and each idle table's status written exactly once (its first
  observation; nothing changes after it);
- the three runs created once each;
- over a quiet window of three intervals: every table observed again (its observed
  timestamp moved), no request naming an idle table, no metadata patch of any object, and no
  429 over the whole run.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from kubernetes import client

from tests.controlplane import flows
from tests.controlplane.controller import ControllerProcess, Install, install_chart
from tests.controlplane.kube import condition, wait_for
from tests.controlplane.plane import ControlPlane
from tests.support.kmock_controller import fragmented_table
from txntable.engine import Table

TABLES = 300
FRAGMENTED = 3
POLICIES = 20
INTERVAL = 5
QUIET_INTERVALS = 3
OBSERVED = re.compile(
    r'^txntable_table_observed_timestamp_seconds\{[^}]*table="([^"]+)"[^}]*\} (\S+)$', re.M
)


def _observed(proc: ControllerProcess) -> dict[str, float]:
    return {m[1]: float(m[2]) for m in OBSERVED.finditer(proc.metrics())}


def _writes_of(events: list[dict[str, Any]], names: list[str]) -> dict[str, list[Any]]:
    """Each status write of the tables ``names``: when it was received, and what it sent (every
    condition's status, reason and transition time; the other fields whole)."""
    out: dict[str, list[Any]] = {name: [] for name in names}
    for e in events:
        ref = e.get("objectRef") or {}
        if ref.get("name") in out and ref.get("subresource") == "status" and e["verb"] == "patch":
            status = dict((e.get("requestObject") or {}).get("status") or {})
            conditions = {
                c.get("type"): (c.get("status"), c.get("reason"), c.get("lastTransitionTime"))
                for c in status.pop("conditions", None) or []
            }
            out[ref["name"]].append((e.get("requestReceivedTimestamp"), conditions, status))
    return out


def _small(location: Path) -> None:
    data = pa.table({"id": pa.array([1, 2], pa.int64())})
    Table.create(str(location), data.schema).append(data)


def test_three_hundred_tables_cost_what_they_change(
    control_plane: ControlPlane, admin: Any, installed: Install, namespace: str, tmp_path: Path
) -> None:
    del installed  # the shared release installed the CRDs; this one has its own namespace
    install = install_chart(
        control_plane,
        tmp_path / "install",
        release="small-scale",
        namespace=f"{namespace}-system",
        values={
            "crds": {"create": False},
            "watch": {"namespaces": [namespace]},
            "config": {
                "observeIntervalSeconds": INTERVAL,
                "defaultBackend": "job",
                "logFormat": "text",
                "maxConcurrentRuns": FRAGMENTED,
            },
        },
    )
    template = tmp_path / "template"
    _small(template)
    names = [f"t{i:03d}" for i in range(TABLES)]
    fragmented = set(names[:FRAGMENTED])
    idle = {"triggers": {"smallFiles": 10_000, "cooldown": "1h"}}
    policies = [f"idle-{i:02d}" for i in range(POLICIES - 1)]
    objects = [flows.policy(namespace, "compact")]
    objects += [flows.policy(namespace, p, **idle) for p in policies]
    for i, name in enumerate(names):
        location = tmp_path / "tables" / name
        if name in fragmented:
            fragmented_table(location)
        else:
            shutil.copytree(template, location, copy_function=os.link)
        policy = "compact" if name in fragmented else policies[i % len(policies)]
        table = flows.table(namespace, name, location, policy)
        table["spec"]["observeInterval"] = f"{INTERVAL}s"
        objects.append(table)
    flows.create(admin, *objects)
    controller = ControllerProcess.start(control_plane, install, tmp_path / "controller")
    try:

        def every_table_ready() -> bool:
            items = client.CustomObjectsApi(admin).list_namespaced_custom_object(
                "txntable.io", "v1alpha1", namespace, "txntables"
            )["items"]
            ready = [o for o in items if (condition(o, "Ready") or {}).get("status") == "True"]
            return len(ready) == TABLES

        wait_for("every table Ready", every_table_ready, timeout=240)
        for name in fragmented:
            flows.the_run(admin, namespace, name, "job", timeout=120)
        wait_for("every table observed", lambda: len(_observed(controller)) == TABLES, 60)

        def metadata_patches() -> int:
            return sum(
                1
                for e in control_plane.audit_events()
                if e.get("user", {}).get("username") == install.user
                and e.get("verb") == "patch"
                and (e.get("objectRef") or {}).get("namespace") == namespace
                and not (e.get("objectRef") or {}).get("subresource")
            )

        before = -1
        for _ in range(12):  # Kopf's finalizer on every object, once: then quiet
            now = metadata_patches()
            if now == before:
                break
            before = now
            time.sleep(INTERVAL)
        first = _observed(controller)
        quiet_from = time.time()
        time.sleep(QUIET_INTERVALS * INTERVAL)
        last = _observed(controller)
        quiet_to = time.time()
    finally:
        controller.stop()

    moved = [n for n in names if last.get(n, 0.0) > first.get(n, 0.0)]
    assert len(moved) == TABLES, sorted(set(names) - set(moved))[:10]

    mine = [
        e
        for e in control_plane.audit_events()
        if e.get("user", {}).get("username") == install.user
        and e.get("stage") == "ResponseComplete"
    ]
    assert [e for e in mine if (e.get("responseStatus") or {}).get("code") == 429] == []
    status_writes = collections.Counter(
        e["objectRef"]["name"]
        for e in mine
        if (e.get("objectRef") or {}).get("resource") == "txntables"
        and e["objectRef"].get("subresource") == "status"
        and e["verb"] == "patch"
        and (e.get("responseStatus") or {}).get("code") == 200
    )
    idle_tables = [n for n in names if n not in fragmented]
    written_twice = {n: status_writes[n] for n in idle_tables if status_writes[n] != 1}
    assert written_twice == {}, _writes_of(mine, sorted(written_twice)[:3])
    created = [
        e["objectRef"]["name"]
        for e in mine
        if (e.get("objectRef") or {}).get("resource") == "jobs"
        and e["verb"] == "create"
        and (e.get("responseStatus") or {}).get("code") == 201
    ]
    assert len(created) == len(set(created)) == FRAGMENTED

    def received(e: dict[str, Any]) -> float:
        from datetime import datetime

        return datetime.fromisoformat(str(e["requestReceivedTimestamp"])).timestamp()

    window = [e for e in mine if quiet_from <= received(e) < quiet_to]
    naming_idle = [
        f"{e['verb']} {e['objectRef'].get('resource')}/{e['objectRef'].get('name')}"
        for e in window
        if (e.get("objectRef") or {}).get("name") in set(idle_tables)
    ]
    assert naming_idle == []
    patches = [e for e in window if e["verb"] == "patch" and not e["objectRef"].get("subresource")]
    assert patches == []
    verbs = collections.Counter(f"{e['verb']} {e['objectRef'].get('resource')}" for e in window)
    print(f"{len(window)} requests in {quiet_to - quiet_from:.0f} s of quiet, {len(mine)} in all")
    print(f"by verb: {dict(verbs)}")
