"""What the lifecycle tests share: manifests, reading runs, Events and status, waiting for
them, the audit trail.

The lifecycle tests (``test_run_lifecycle``, ``test_controller_faults``, ``test_run_gates``,
``test_rbac``) drive one controller process per test through a flow on the real API server,
each with its own tables (names unique in the session) in a watched namespace. Each helper here
waits for or asserts one thing, so that the tests say what they check and not how to read it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.controlplane.kube import condition, get_table, wait_for
from tests.controlplane.plane import ControlPlane
from tests.support.kmock_controller import fragmented_table
from tests.support.manifests import compaction_policy_manifest, table_manifest
from txntable.api.common import RunKind
from txntable.launch.names import NAME_HASH_LEN, short_hash
from txntable.launch.run import last_json_line

GROUP, VERSION = "txntable.io", "v1alpha1"
SPARK = ("sparkoperator.k8s.io", "v1beta2", "sparkapplications")
TABLE_LABEL = "txntable.io/table"
#: the plural of each of our kinds, as the API server serves them
PLURALS = {
    "TxnTable": "txntables",
    "CompactionPolicy": "compactionpolicies",
    "CheckpointPolicy": "checkpointpolicies",
}
#: the policy of the lifecycle tests: a fragmented table (24 files of a few KB in two
#: partitions, tests.support.kmock_controller.fragmented_table) is due at once
SMALL_FILES_POLICY: dict[str, Any] = {
    "targetFileSize": "64Mi",
    "minFileSize": "8Mi",
    "triggers": {"smallFiles": 2, "cooldown": "1h"},
}


def policy(ns: str, name: str, **spec: Any) -> dict[str, Any]:
    """A CompactionPolicy: ``SMALL_FILES_POLICY`` with ``spec`` on top."""
    return compaction_policy_manifest(name, namespace=ns, **{**SMALL_FILES_POLICY, **spec})


def table(ns: str, name: str, location: Path, policy_name: str, **spec: Any) -> dict[str, Any]:
    """A TxnTable at ``location`` under CompactionPolicy ``policy_name``, observed every second."""
    return table_manifest(
        name,
        location,
        namespace=ns,
        **{"observeInterval": "1s", "compactionPolicyRef": {"name": policy_name}, **spec},
    )


def create(api: Any, *objects: dict[str, Any]) -> None:
    """Create our custom objects, in the order given. A 404 (the server's "page not found",
    not an object's) right after the CRDs were installed is retried for a few seconds: the
    kube-apiserver serves a new CRD's path a moment after it says Established, and under load
    that moment was long enough for a create to miss it (seen once at -n 2)."""
    custom = client.CustomObjectsApi(api)
    for obj in objects:
        ns = obj["metadata"]["namespace"]
        deadline = time.monotonic() + 10.0
        while True:
            try:
                custom.create_namespaced_custom_object(
                    GROUP, VERSION, ns, PLURALS[obj["kind"]], obj
                )
                break
            except client.ApiException as exc:
                if exc.status != 404 or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def fragmented(api: Any, ns: str, name: str, root: Path, **policy_spec: Any) -> Path:
    """A fragmented table at ``root/name`` (``fragmented_table``: version 12, 24 files), and
    CompactionPolicy (``policy_spec`` on top of ``SMALL_FILES_POLICY``) and TxnTable ``name`` for
    it; the table's location."""
    location = root / name
    fragmented_table(location)
    create(api, policy(ns, name, **policy_spec), table(ns, name, location, name))
    return location


def jobs_of(api: Any, ns: str, name: str) -> list[dict[str, Any]]:
    """The batch Jobs of TxnTable ``name``, as the server returns them (JSON)."""
    found = client.BatchV1Api(api).list_namespaced_job(ns, label_selector=f"{TABLE_LABEL}={name}")
    return [dict(api.sanitize_for_serialization(j)) for j in found.items]


def apps_of(api: Any, ns: str, name: str) -> list[dict[str, Any]]:
    """The SparkApplications of TxnTable ``name``."""
    found = client.CustomObjectsApi(api).list_namespaced_custom_object(
        *SPARK[:2], ns, SPARK[2], label_selector=f"{TABLE_LABEL}={name}"
    )
    return list(found["items"])


def runs_of(api: Any, ns: str, name: str, backend: str) -> list[dict[str, Any]]:
    """The runs of TxnTable ``name`` on ``backend`` (``job`` or ``sparkapplication``)."""
    return jobs_of(api, ns, name) if backend == "job" else apps_of(api, ns, name)


def run_names(api: Any, ns: str, name: str, backend: str) -> list[str]:
    """The names of the runs of TxnTable ``name`` on ``backend``."""
    return [r["metadata"]["name"] for r in runs_of(api, ns, name, backend)]


def the_run(api: Any, ns: str, name: str, backend: str, timeout: float = 90) -> dict[str, Any]:
    """The one run the controller launched for ``name`` (waits for it; fails on two)."""
    runs = wait_for(f"a run of {name}", lambda: runs_of(api, ns, name, backend), timeout)
    assert len(runs) == 1, [r["metadata"]["name"] for r in runs]
    return runs[0]


def events_of(api: Any, ns: str, name: str, kind: str = "TxnTable") -> list[Any]:
    """The Events about object ``name`` (oldest first)."""
    found = client.CoreV1Api(api).list_namespaced_event(
        ns, field_selector=f"involvedObject.name={name},involvedObject.kind={kind}"
    )
    return sorted(found.items, key=lambda e: (e.first_timestamp or e.event_time or 0, e.reason))


def reasons(events: Iterable[Any]) -> list[str]:
    """The reasons of ``events``, in their order."""
    return [e.reason for e in events]


def wait_event(api: Any, ns: str, name: str, reason: str) -> None:
    """Wait until an Event with ``reason`` about TxnTable ``name`` is posted."""
    wait_for(f"{name}: {reason} posted", lambda: reason in reasons(events_of(api, ns, name)))


def status(api: Any, ns: str, name: str) -> dict[str, Any]:
    """TxnTable ``name``'s status (empty before the controller writes one)."""
    return dict(get_table(api, ns, name).get("status") or {})


def wait_plan(api: Any, ns: str, name: str) -> dict[str, Any]:
    """``status.plan`` of TxnTable ``name``, once the controller has observed and planned it."""
    found: dict[str, Any] = wait_for(
        f"{name}: status.plan", lambda: status(api, ns, name).get("plan")
    )
    return found


def figures(api: Any, ns: str, name: str, *keys: str) -> tuple[Any, ...]:
    """Fields of the table's status, in the order asked."""
    found = status(api, ns, name)
    return tuple(found.get(k) for k in keys)


def compaction(api: Any, ns: str, name: str) -> dict[str, Any]:
    """``status.lastCompaction`` of TxnTable ``name`` (empty when it has none)."""
    return dict(status(api, ns, name).get("lastCompaction") or {})


def wait_running(api: Any, ns: str, name: str, run: str) -> None:
    """Wait until ``status.lastCompaction`` records run ``run`` as Running."""

    def running() -> bool:
        found = compaction(api, ns, name)
        return (found.get("runName"), found.get("outcome")) == (run, "Running")

    wait_for(f"{name}: run {run} in status as Running", running)


def wait_recorded(api: Any, ns: str, name: str, run: str, timeout: float = 90) -> dict[str, Any]:
    """``status.lastCompaction`` once it records run ``run`` as finished."""

    def done() -> dict[str, Any] | None:
        found = compaction(api, ns, name)
        finished = found.get("runName") == run and found.get("outcome") not in (None, "Running")
        return found if finished else None

    return wait_for(f"{name}: run {run} recorded as finished", done, timeout)


def compacting(api: Any, ns: str, name: str) -> dict[str, Any]:
    """TxnTable ``name``'s Compacting condition (empty when it has none)."""
    return dict(condition(get_table(api, ns, name), "Compacting") or {})


def wait_compacting(api: Any, ns: str, name: str, reason: str) -> dict[str, Any]:
    """The Compacting condition of TxnTable ``name``, once its reason is ``reason``."""

    def said() -> dict[str, Any] | None:
        found = compacting(api, ns, name)
        return found if found.get("reason") == reason else None

    return wait_for(f"{name}: Compacting says {reason}", said)


def delete_table(api: Any, ns: str, name: str, timeout: float = 60) -> None:
    """Delete TxnTable ``name`` and wait until it is gone (the controller drops its finalizer)."""
    custom = client.CustomObjectsApi(api)
    try:
        custom.delete_namespaced_custom_object(GROUP, VERSION, ns, "txntables", name)
    except ApiException as exc:
        if exc.status != 404:
            raise

    def gone() -> bool:
        try:
            custom.get_namespaced_custom_object(GROUP, VERSION, ns, "txntables", name)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for(f"TxnTable {ns}/{name} deleted", gone, timeout)


def requests_by(
    plane: ControlPlane, user: str, verb: str, resource: str, ns: str | None = None
) -> list[dict[str, Any]]:
    """The audit events of ``user``'s ``verb`` requests on ``resource`` (``jobs``,
    ``sparkapplications``, ``txntables/status``...), answered by the server (any code)."""
    out = []
    group, _, sub = resource.partition("/")
    for event in plane.audit_events():
        ref = event.get("objectRef") or {}
        if (
            event.get("user", {}).get("username") == user
            and event.get("verb") == verb
            and ref.get("resource") == group
            and (ref.get("subresource") or "") == sub
            and (ns is None or ref.get("namespace") == ns)
        ):
            out.append(event)
    return out


def created_runs(
    plane: ControlPlane, user: str, backend: str, ns: str, table: str, policy: str
) -> list[str]:
    """Names of the compaction runs of ``table`` under ``policy`` that ``user`` created (201),
    according to the audit log (a run's name holds the hash of its kind, policy and table:
    ``txntable.launch.names.run_name``)."""
    resource = "jobs" if backend == "job" else "sparkapplications"
    digest = f"-{short_hash(RunKind.OPTIMIZE, policy, table)[:NAME_HASH_LEN]}-"
    return [
        str(e["objectRef"].get("name"))
        for e in requests_by(plane, user, "create", resource, ns)
        if e.get("responseStatus", {}).get("code") == 201
        and str(e["objectRef"].get("name", "")).startswith("opt-")
        and digest in str(e["objectRef"].get("name", ""))
    ]


def status_writes(
    plane: ControlPlane, user: str, ns: str, name: str
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(patch sent, object the server kept) of each write of TxnTable ``name``'s status by
    ``user`` that the server accepted, oldest first: the audit log holds both at
    RequestResponse level (``plane.AUDIT_POLICY``)."""
    out = []
    for event in requests_by(plane, user, "patch", "txntables/status", ns):
        if event["objectRef"].get("name") != name:
            continue
        if event.get("responseStatus", {}).get("code") != 200:
            continue
        out.append((dict(event["requestObject"]), dict(event["responseObject"])))
    return out


def metadata_writes(
    plane: ControlPlane, user: str, ns: str, resource: str, name: str
) -> list[list[str]]:
    """The metadata paths of each patch of ``name``'s object (not its status) by ``user``
    that the server accepted, oldest first: a JSON patch's operations (Kopf's finalizer,
    after its resourceVersion test) or a merge patch's metadata keys."""
    out = []
    for event in requests_by(plane, user, "patch", resource, ns):
        if event["objectRef"].get("name") != name:
            continue
        if event.get("responseStatus", {}).get("code") != 200:
            continue
        sent = event.get("requestObject")
        if isinstance(sent, list):
            out.append(sorted(op["path"] for op in sent if op.get("op") != "test"))
        elif isinstance(sent, dict):
            out.append(sorted(f"/metadata/{key}" for key in sent.get("metadata") or {}))
    return out


def dropped(sent: Any, kept: Any, path: str = "") -> list[str]:
    """Where the object ``kept`` lacks a value the JSON merge patch ``sent`` set (the server
    pruned it or changed it): a null in the patch deletes, anything else must read back equal."""
    if isinstance(sent, dict):
        if not isinstance(kept, dict):
            return [path or "."]
        out: list[str] = []
        for key, value in sent.items():
            where = f"{path}.{key}"
            if value is None:
                if key in kept:
                    out.append(f"{where} (deleted by the patch, still there)")
                continue
            if key not in kept:
                out.append(where)
                continue
            out += dropped(value, kept[key], where)
        return out
    return [] if sent == kept else [f"{path}: sent {sent!r}, kept {kept!r}"]


def assert_status_kept(plane: ControlPlane, user: str, ns: str, name: str) -> int:
    """Every status the controller wrote for ``name`` was kept whole by the API server (the
    structural schema prunes unknown fields silently: a field the models write and the CRD
    lacks would vanish here); the number of writes checked."""
    writes = status_writes(plane, user, ns, name)
    assert writes, f"no status write of {ns}/{name} by {user} in the audit log"
    for sent, kept in writes:
        # the status subresource takes only .status (Kopf sends nothing else there)
        lost = dropped(sent.get("status"), kept.get("status"), ".status")
        assert not lost, (lost, sent)
    return len(writes)


def wait_read_back(plane: ControlPlane, api: Any, user: str, ns: str, name: str) -> None:
    """The status read from the server is the one the controller last wrote, as kept."""

    def same() -> bool:
        writes = status_writes(plane, user, ns, name)
        return bool(writes) and status(api, ns, name) == writes[-1][1].get("status")

    wait_for(f"{ns}/{name}: status read back equal to the last one written", same)


def json_result(log: str) -> dict[str, Any]:
    """A job's result line: the last line of its log that is a JSON object."""
    found = last_json_line(log)
    assert found is not None, log[-3000:]
    return found
