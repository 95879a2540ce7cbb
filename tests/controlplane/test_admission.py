"""Admission by the real API server: the examples are accepted, the invalid manifests refused.

The unit tests judge manifests offline (``tests/unit/crdtools``: jsonschema for the OpenAPI
schema, cel-python for the ``x-kubernetes-validations`` rules). Here the same manifests go to
kube-apiserver, whose structural schema, strict field validation and CEL (cel-go with the
Kubernetes libraries) are the ones a cluster runs: every example must be created, and every
case of ``tests/unit/api/test_invalid_manifests.py`` must be refused at the field path the
models' ``InvalidSpecError`` names, with the CEL rule's own message where a rule refuses it.
A case the server accepts, or refuses elsewhere, is a disagreement between the emulation and
the real thing.

Every case runs on two API servers (``server``): the session's (the pinned release,
``tools/controlplane``) and the oldest release the chart claims (Chart.yaml ``kubeVersion``,
built from ``tools/controlplane-oldest``), on a control plane of its own with the chart
installed as the session's is. The CRDs' CEL rules (the quantity library among them) must be
compiled, and judge alike, on both.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.controlplane import binaries
from tests.controlplane.conftest import (
    INSTALL_VALUES,
    RELEASE,
    SYSTEM_NAMESPACE,
    started_plane,
)
from tests.controlplane.controller import Install, install_chart
from tests.controlplane.flows import GROUP, VERSION
from tests.controlplane.kube import apply
from tests.controlplane.plane import ControlPlane
from tests.support.crd_keys import HARMLESS_KEYS, SECRET_KEYS, SPARK_CONF_KEYS
from tests.support.invalid_manifests import (
    CASES,
    CEILINGS,
    CKPT,
    NIGHTLY,
    SIZES,
    TABLE,
    Case,
    _build,
    ceiling_doc,
    model_refuses,
    put,
)
from tests.unit.crdtools import (
    cel_errors,
    load_crds,
    load_examples,
    schema_errors,
    schema_of,
    validate,
)
from txntable.api.common import is_reserved_spark_conf

CRDS = load_crds()
PLURALS = {kind: crd["spec"]["names"]["plural"] for kind, crd in CRDS.items()}


@dataclass(frozen=True)
class Server:
    """An API server the cases run on, the Kubernetes release it must report, its install."""

    release: str
    plane: ControlPlane
    install: Install


@pytest.fixture(scope="module", params=["pinned", "oldest"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """The session's control plane, then one of the oldest Kubernetes the chart claims (its
    own etcd and API server, the chart installed as on the session's, stopped after this
    module)."""
    if request.param == "pinned":
        plane = request.getfixturevalue("control_plane")
        install = request.getfixturevalue("session_install")
        yield Server(binaries.versions()[0], plane, install)
        return
    with started_plane(tmp_path_factory.mktemp("oldest-logs"), binaries.OLDEST) as plane:
        install = install_chart(
            plane,
            tmp_path_factory.mktemp("oldest-install"),
            release=RELEASE,
            namespace=SYSTEM_NAMESPACE,
            values=INSTALL_VALUES,
        )
        yield Server(binaries.OLDEST.required(binaries.KUBE_MODULE), plane, install)


@pytest.fixture(scope="module")
def admin(server: Server) -> Any:
    """The admin of the server the cases run on (the ``namespace`` fixture makes its
    namespaces there too)."""
    return server.plane.client()


@pytest.fixture(scope="module")
def installed(server: Server) -> Install:
    return server.install


def test_the_server_is_the_release_it_stands_for(server: Server) -> None:
    status, body = server.plane.get("/version")
    assert status == 200 and json.loads(body)["gitVersion"] == server.release
    crds = {o["metadata"]["name"] for o in server.install.of_kind("CustomResourceDefinition")}
    assert {f"{plural}.{GROUP}" for plural in PLURALS.values()} <= crds


def _rules(node: Any) -> list[dict[str, Any]]:
    """Every x-kubernetes-validations entry under ``node``."""
    out: list[dict[str, Any]] = []
    if isinstance(node, dict):
        out.extend(node.get("x-kubernetes-validations", []))
        for value in node.values():
            out.extend(_rules(value))
    elif isinstance(node, list):
        for value in node:
            out.extend(_rules(value))
    return out


#: messages of every CEL rule in crds/ (a case refused by one of them must carry its message)
CEL_MESSAGES = {rule["message"] for crd in CRDS.values() for rule in _rules(crd)}


def _create(api: Any, doc: dict[str, Any], namespace: str) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["metadata"]["namespace"] = namespace
    out: dict[str, Any] = client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURALS[doc["kind"]], doc, field_validation="Strict"
    )
    return out


def _replace(api: Any, doc: dict[str, Any], namespace: str) -> dict[str, Any]:
    custom = client.CustomObjectsApi(api)
    plural, name = PLURALS[doc["kind"]], doc["metadata"]["name"]
    current = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, plural, name)
    doc = copy.deepcopy(doc)
    doc["metadata"].update(
        namespace=namespace, resourceVersion=current["metadata"]["resourceVersion"]
    )
    out: dict[str, Any] = custom.replace_namespaced_custom_object(
        GROUP, VERSION, namespace, plural, name, doc, field_validation="Strict"
    )
    return out


def _submit(api: Any, case: Case, doc: dict[str, Any], old: Any, name: str, ns: str) -> None:
    """Send ``doc`` as ``case`` says: created, or (an update case) replacing ``old``, created
    first; both named ``name``. The API server's refusal is raised."""
    doc["metadata"]["name"] = name
    if case.update:
        old = copy.deepcopy(old)
        old["metadata"]["name"] = name
        _create(api, old, ns)
        _replace(api, doc, ns)
    else:
        _create(api, doc, ns)


def _refusal(exc: ApiException) -> tuple[int, list[tuple[str, str]], str]:
    """(HTTP status, [(field, message)] of the causes, whole message) of a refusal. Strict field
    validation refuses an unknown field with a 400 whose message alone names the field."""
    body = json.loads(exc.body)
    causes = [
        (c.get("field", ""), c.get("message", ""))
        for c in (body.get("details") or {}).get("causes", [])
    ]
    message = str(body.get("message", ""))
    causes += [(f, "unknown field") for f in re.findall(r'unknown field "([^"]+)"', message)]
    return int(exc.status), causes, message


def _cel_names_no_element(server: str, models: str) -> bool:
    """A CEL rule's error is reported at the node that holds the rule (or its static
    ``fieldPath``): it cannot name a map key or list index found while evaluating, which the
    models do name (``spec.storage.options`` vs ``spec.storage.options[AWS_SECRET_ACCESS_KEY]``)."""
    return (
        models.startswith(server) and re.fullmatch(r"\[[^\]]+\]", models[len(server) :]) is not None
    )


@pytest.mark.parametrize(
    ("source", "doc"),
    [(p, d) for p, d in load_examples()],
    ids=[
        f"{p.parent.name}/{p.name}:{d['kind']}:{d['metadata']['name']}" for p, d in load_examples()
    ],
)
def test_every_example_is_accepted(
    installed: Install, admin: Any, namespace: str, source: Any, doc: dict[str, Any]
) -> None:
    doc = copy.deepcopy(doc)
    doc["metadata"]["namespace"] = namespace
    created = apply(admin, doc)  # server-side apply, as `kubectl apply --server-side` would
    assert created["metadata"]["uid"]
    if doc["kind"] in PLURALS:
        # what was stored is what was sent (plus defaults): nothing pruned by the schema
        stored = client.CustomObjectsApi(admin).get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURALS[doc["kind"]], doc["metadata"]["name"]
        )
        assert _contains(stored["spec"], doc["spec"]), (stored["spec"], doc["spec"])


def _contains(stored: Any, sent: Any) -> bool:
    """``sent`` is within ``stored`` (``stored`` may have defaults added)."""
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(
            k in stored and _contains(stored[k], v) for k, v in sent.items()
        )
    if isinstance(sent, list):
        return (
            isinstance(stored, list)
            and len(stored) == len(sent)
            and all(map(_contains, stored, sent))
        )
    return bool(stored == sent)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_real_api_server_refuses_at_the_models_field_path(
    installed: Install, admin: Any, namespace: str, case: Case
) -> None:
    doc, old = _build(case)
    try:
        _submit(admin, case, doc, old, "case", namespace)
    except ApiException as exc:
        status, causes, message = _refusal(exc)
    else:
        pytest.fail(
            f"the API server accepted it (cel-python/jsonschema refuse it: {case.api_says!r})"
        )
    assert status in (400, 422), message
    fields = [f for f, _ in causes]
    if any(case.api_says in m for m in CEL_MESSAGES):  # a CEL rule's message, at its node
        at = [f for f, m in causes if case.api_says in m]
        assert at, f"the rule's message is not among {causes}"
        assert case.path in at or any(_cel_names_no_element(f, case.path) for f in at), (
            f"refused at {at}, the models say {case.path}: {message}"
        )
    else:
        assert case.path in fields, f"refused at {fields}, the models say {case.path}: {message}"


#: Manifests next to a rule's boundary that the emulation accepts: the real CEL must too.
def _edge(name: str, base: dict[str, Any], path: str, value: Any, update: bool = False) -> Case:
    return Case(name, base, put(path, value), "", "", update=update)


def _selector(op: str, values: list[str] | None = None) -> dict[str, Any]:
    expr: dict[str, Any] = {"key": "t", "operator": op}
    if values is not None:
        expr["values"] = values
    return {"matchExpressions": [expr]}


TWO_COLUMNS = [{"name": "a", "type": "long"}, {"name": "d", "type": "date"}]
ACCEPTED_EDGES = [
    _edge("min file size equal to target", NIGHTLY, "spec.minFileSize", "512Mi"),
    _edge("min in bytes equal to target", NIGHTLY, "spec.minFileSize", 536870912),
    _edge("min in decimal units below target", NIGHTLY, "spec.minFileSize", "500M"),
    _edge("max files per bin equal to min input files (4)", NIGHTLY, "spec.maxFilesPerBin", 4),
    # the executor pod: 16Gi of heap + 10% overhead (issue 23.11)
    _edge("memory ceiling one byte above the executor pod", NIGHTLY,
          "spec.spark.autoSize.maxExecutorMemory", 16 * 2**30 + 16 * 2**30 // 10 + 1),
    _edge("memory ceiling in G above the Gi executor pod", NIGHTLY,
          "spec.spark.autoSize.maxExecutorMemory", "19G"),
    # cron ranges written the right way round, and a schedule that never fires: admitted, the
    # policy's status reports it (issue 23.3)
    _edge("cron range forwards", NIGHTLY, "spec.triggers.schedule", "10-30 * * * *"),
    _edge("cron range of one value", NIGHTLY, "spec.triggers.schedule", "5-5 * * * *"),
    _edge("cron day range forwards", NIGHTLY, "spec.triggers.schedule", "0 2 * * MON-FRI"),
    _edge("cron range with a step forwards", NIGHTLY, "spec.triggers.schedule", "0 4-20/2 * * *"),
    _edge("cron that never fires", NIGHTLY, "spec.triggers.schedule", "0 0 30 2 *"),
    _edge("sparkConf key beside a reserved one", NIGHTLY, "spec.spark.sparkConf",
          {"spark.executor.memoryOverhead": "2g", "spark.masterx": "x"}),
    _edge("gzip level 9", NIGHTLY, "spec.parquet", {"compression": "gzip", "compressionLevel": 9}),
    _edge("zstd level 22", NIGHTLY, "spec.parquet",
          {"compression": "zstd", "compressionLevel": 22}),
    _edge("a level without a codec", NIGHTLY, "spec.parquet", {"compressionLevel": 5}),
    _edge("selector NotIn with values", NIGHTLY, "spec.tableSelector", _selector("NotIn", ["x"])),
    _edge("selector DoesNotExist without values", NIGHTLY, "spec.tableSelector",
          _selector("DoesNotExist")),
    _edge("partition filter In with two values", NIGHTLY, "spec.partitionFilters",
          [{"column": "d", "operator": "In", "values": ["1", "2"]}]),
    _edge("window across midnight", NIGHTLY, "spec.maintenanceWindows",
          [{"start": "22:00", "end": "02:00"}]),
    _edge("only a small-file percentage", NIGHTLY, "spec.triggers", {"smallFilePercent": 30}),
    _edge("partition columns all declared", TABLE, "spec.create",
          {"columns": TWO_COLUMNS, "partitionColumns": ["d"]}),
    _edge("unchanged location on update", TABLE, "spec.suspend", True, update=True),
]  # fmt: skip


@pytest.mark.parametrize("case", ACCEPTED_EDGES, ids=[c.name for c in ACCEPTED_EDGES])
def test_what_the_emulation_accepts_the_real_api_server_accepts(
    installed: Install, admin: Any, namespace: str, case: Case
) -> None:
    doc, old = _build(case)
    crd = CRDS[doc["kind"]]
    assert validate(crd, doc, old) == [], "the emulation refuses it: not an edge case"
    _submit(admin, case, doc, old, "edge", namespace)


@pytest.mark.parametrize("key", SECRET_KEYS + HARMLESS_KEYS)
def test_the_secret_option_rule_agrees_with_the_emulation(
    installed: Install, admin: Any, namespace: str, key: str
) -> None:
    doc = copy.deepcopy(TABLE)
    doc["metadata"]["name"] = "opt-" + hashlib.sha1(key.encode()).hexdigest()[:10]
    doc["spec"]["storage"]["options"] = {key: "x"}
    emulated = bool(validate(CRDS["TxnTable"], doc))
    try:
        _create(admin, doc, namespace)
        refused = False
    except ApiException as exc:
        assert exc.status == 422, exc.body
        refused = True
    assert (emulated, refused) == (key in SECRET_KEYS, key in SECRET_KEYS)


def _refused(api: Any, doc: dict[str, Any], namespace: str) -> bool:
    """Whether the API server refuses to create ``doc`` (a dry run: nothing is stored)."""
    doc = copy.deepcopy(doc)
    doc["metadata"]["namespace"] = namespace
    try:
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURALS[doc["kind"]], doc,
            dry_run="All", field_validation="Strict",
        )  # fmt: skip
    except ApiException as exc:
        assert exc.status == 422, exc.body
        return True
    return False


@pytest.mark.parametrize("base", [NIGHTLY, CKPT], ids=["compaction", "checkpoint"])
def test_the_reserved_spark_conf_rule_agrees_with_the_emulation(
    installed: Install, admin: Any, namespace: str, base: dict[str, Any]
) -> None:
    """Issue 23.5: the keys the run builders set are refused by cel-python, by the models and by
    real CEL alike, and the keys beside them accepted alike."""
    verdicts = []
    for key in SPARK_CONF_KEYS:
        doc = copy.deepcopy(base)
        doc["spec"]["spark"]["sparkConf"] = {key: "x"}
        emulated = bool(validate(CRDS[doc["kind"]], doc))
        verdicts.append((key, emulated, _refused(admin, doc, namespace)))
    assert [v for v in verdicts if v[1] != v[2]] == []
    assert [k for k, emulated, _ in verdicts if emulated] == [
        k for k in SPARK_CONF_KEYS if is_reserved_spark_conf(k)
    ]


def _cron_cases() -> list[str]:
    """Schedules either side of the backwards-range rule: number pairs at every tens-digit
    boundary the generated regex spells out (with and without leading zeros, first item and in
    a list with a step), every pair of month and day names, numeric month, day and weekday
    ranges."""
    edges = [0, 1, 2, 8, 9, 10, 11, 18, 19, 20, 21, 29, 30, 31, 39, 40, 41, 49, 50, 51, 58, 59]
    out = [f"{a}-{b} * * * *" for a in edges for b in edges]
    out += [f"{a:02d}-{b} * * * *" for a in edges[:5] for b in edges[:5]]
    out += [f"0 1,{a}-{b:02d}/3 * * *" for a in (0, 9, 10, 19, 20, 23) for b in (0, 9, 10, 23)]
    months = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
    days = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
    out += [f"0 0 1 {a}-{b} *" for a in months for b in months]
    out += [f"0 0 * * {a}-{b}" for a in days for b in days]
    out += ["0 0 1 12-1 *", "0 0 1 1-12 *", "0 0 31-1 * *", "0 0 1-31 * *", "0 0 * * 5-0",
            "0 0 * * 0-7", "0 0 * * 7-0", "0 0 30 2 *", "0 0 * * 1-5/2"]  # fmt: skip
    return out


def test_the_cron_rule_agrees_with_the_emulation(
    installed: Install, admin: Any, namespace: str
) -> None:
    """Issue 23.3: the backwards-range rule is a generated regular expression; real CEL (RE2)
    and cel-python (Python's re) give every schedule here the same verdict. (The emulation
    judges the schedule field alone, the rest of the manifest being an accepted example.)"""
    crd = CRDS["CompactionPolicy"]
    assert validate(crd, NIGHTLY) == []
    field = schema_of(crd)["properties"]["spec"]["properties"]["triggers"]["properties"]
    verdicts = []
    for schedule in _cron_cases():
        emulated = bool(
            schema_errors(field["schedule"], schedule) or cel_errors(field["schedule"], schedule)
        )
        doc = copy.deepcopy(NIGHTLY)
        doc["spec"]["triggers"]["schedule"] = schedule
        verdicts.append((schedule, emulated, _refused(admin, doc, namespace)))
    assert [v for v in verdicts if v[1] != v[2]] == []
    refused = sum(r for _, _, r in verdicts)
    assert 0 < refused < len(verdicts)  # both verdicts really occur


def test_the_autosize_ceiling_rule_agrees_with_the_emulation_and_the_models(
    installed: Install, admin: Any, namespace: str
) -> None:
    """Issue 23.11: the ceiling must exceed the executor pod, not only its heap: cel-python,
    the models and real CEL (its quantity library) draw that line at the same byte."""
    crd = CRDS["CompactionPolicy"]
    verdicts = []
    for heap, ceiling in CEILINGS:
        doc = ceiling_doc(heap, ceiling)
        verdict = (bool(validate(crd, doc)), model_refuses(doc), _refused(admin, doc, namespace))
        verdicts.append((heap, ceiling, *verdict))
    assert [v for v in verdicts if len(set(v[2:])) != 1] == []
    refused = sum(v[2] for v in verdicts)
    assert 0 < refused < len(verdicts)


def test_the_size_pattern_agrees_with_the_emulation_and_the_models(
    installed: Install, admin: Any, namespace: str
) -> None:
    """A size is a whole number of bytes for the real API server (RE2 on the CRD's pattern)
    as for cel-python's emulation and the models: ``1.1Ki`` (1126.4 bytes) is refused by all
    three, ``1.5Gi`` accepted by all three, on every size field's pattern alike."""
    crd = CRDS["CompactionPolicy"]
    verdicts = []
    for text, size in SIZES:
        doc = copy.deepcopy(NIGHTLY)
        doc["spec"]["maxBytesPerRun"] = text
        verdict = (bool(validate(crd, doc)), model_refuses(doc), _refused(admin, doc, namespace))
        verdicts.append((text, size is None, *verdict))
    assert [v for v in verdicts if len(set(v[1:])) != 1] == []
