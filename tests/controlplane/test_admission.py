"""Admission by the real API server: the examples are accepted, the invalid manifests refused.

The unit tests judge manifests offline (``tests/unit/crdtools``: jsonschema for the OpenAPI
schema, cel-python for the ``x-kubernetes-validations`` rules). Here the same manifests go to
kube-apiserver, whose structural schema, strict field validation and CEL (cel-go with the
Kubernetes libraries) are the ones a cluster runs: every example must be created, and every
case of ``tests/unit/api/test_invalid_manifests.py`` must be refused at the field path the
models' ``InvalidSpecError`` names, with the CEL rule's own message where a rule refuses it.
A case the server accepts, or refuses elsewhere, is a disagreement between the emulation and
the real thing.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.controlplane.controller import Install
from tests.controlplane.kube import apply
from tests.unit.api.test_crds import HARMLESS_KEYS, SECRET_KEYS
from tests.unit.api.test_invalid_manifests import CASES, NIGHTLY, TABLE, Case, _build, put
from tests.unit.crdtools import load_crds, load_examples, validate

GROUP, VERSION = "txntable.io", "v1alpha1"
PLURALS = {kind: crd["spec"]["names"]["plural"] for kind, crd in load_crds().items()}


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
CEL_MESSAGES = {rule["message"] for crd in load_crds().values() for rule in _rules(crd)}


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
    doc["metadata"]["name"] = "case"
    try:
        if case.update:
            old = copy.deepcopy(old)
            old["metadata"]["name"] = "case"
            _create(admin, old, namespace)
            _replace(admin, doc, namespace)
        else:
            _create(admin, doc, namespace)
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
    _edge("memory ceiling just above the heap", NIGHTLY,
          "spec.spark.autoSize.maxExecutorMemory", "16385Mi"),
    _edge("memory ceiling in G above Gi heap", NIGHTLY,
          "spec.spark.autoSize.maxExecutorMemory", "18G"),
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
    crd = load_crds()[doc["kind"]]
    assert validate(crd, doc, old) == [], "the emulation refuses it: not an edge case"
    doc["metadata"]["name"] = "edge"
    if case.update:
        old = copy.deepcopy(old)
        old["metadata"]["name"] = "edge"
        _create(admin, old, namespace)
        _replace(admin, doc, namespace)
    else:
        _create(admin, doc, namespace)


@pytest.mark.parametrize("key", SECRET_KEYS + HARMLESS_KEYS)
def test_the_secret_option_rule_agrees_with_the_emulation(
    installed: Install, admin: Any, namespace: str, key: str
) -> None:
    doc = copy.deepcopy(TABLE)
    doc["metadata"]["name"] = "opt-" + hashlib.sha1(key.encode()).hexdigest()[:10]
    doc["spec"]["storage"]["options"] = {key: "x"}
    emulated = bool(validate(load_crds()["TxnTable"], doc))
    try:
        _create(admin, doc, namespace)
        refused = False
    except ApiException as exc:
        assert exc.status == 422, exc.body
        refused = True
    assert (emulated, refused) == (key in SECRET_KEYS, key in SECRET_KEYS)
