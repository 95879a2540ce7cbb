"""The CRDs are strict, structural and self-describing, and agree with ``txntable.api``.

The YAML in crds/ is hand-maintained; these tests are what keep it honest: every property
has a type and a description, no unknown schema keywords, bounded lists and maps (CEL cost),
printer columns that point at real fields, rules that cel-python can evaluate, and field
names, requiredness, enums, defaults and bounds equal to the Python models'.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import celpy
import jsonschema
import pytest

from tests.support.crd_keys import HARMLESS_KEYS, SECRET_KEYS, SPARK_CONF_KEYS
from tests.unit.crd_models import compare
from tests.unit.crdtools import (
    KUBERNETES_CEL,
    STANDARD_CEL,
    compile_rule,
    load_crds,
    rule_functions,
    schema_of,
)
from txntable.api import constants as c
from txntable.api._codec import from_obj
from txntable.api.common import (
    RESERVED_SPARK_CONF,
    RESERVED_SPARK_CONF_RULE,
    SECRET_RULE,
    PolicyStatus,
    SparkTemplate,
    is_reserved_spark_conf,
    is_secret_option,
)
from txntable.api.errors import InvalidSpecError
from txntable.api.policies import (
    CEILING_RULE,
    CRON_BACKWARDS_RULE,
    CheckpointPolicySpec,
    CompactionPolicySpec,
)
from txntable.api.table import TxnTableSpec, TxnTableStatus
from txntable.launch import RunRequest
from txntable.launch.errors import PermanentLaunchError

CRDS = load_crds()
KINDS = [c.KIND_TABLE, c.KIND_COMPACTION_POLICY, c.KIND_CHECKPOINT_POLICY]
MODELS = {
    c.KIND_TABLE: (TxnTableSpec, TxnTableStatus),
    c.KIND_COMPACTION_POLICY: (CompactionPolicySpec, PolicyStatus),
    c.KIND_CHECKPOINT_POLICY: (CheckpointPolicySpec, PolicyStatus),
}
ALLOWED_KEYS = {
    "type", "description", "properties", "required", "items", "additionalProperties", "enum",
    "default", "minimum", "maximum", "minLength", "maxLength", "pattern", "format", "minItems",
    "maxItems", "maxProperties", "anyOf", "x-kubernetes-int-or-string",
    "x-kubernetes-validations", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
}  # fmt: skip
INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


def nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with its path; ``[]`` for items, ``{}`` for map values."""
    yield path, schema
    for key, sub in schema.get("properties", {}).items():
        yield from nodes(sub, f"{path}.{key}" if path else key)
    if isinstance(schema.get("additionalProperties"), dict):
        yield from nodes(schema["additionalProperties"], f"{path}{{}}")
    if "items" in schema:
        yield from nodes(schema["items"], f"{path}[]")


def test_one_crd_per_kind() -> None:
    assert sorted(CRDS) == sorted(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_names_scope_version_and_subresources(kind: str) -> None:
    crd = CRDS[kind]
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == f"{c.PLURALS[kind]}.{c.GROUP}"
    spec = crd["spec"]
    assert spec["group"] == c.GROUP
    assert spec["scope"] == "Namespaced"
    names = spec["names"]
    assert names["kind"] == kind
    assert names["plural"] == c.PLURALS[kind]
    assert names["singular"] == c.SINGULAR[kind]
    assert tuple(names["shortNames"]) == c.SHORT_NAMES[kind]
    assert names["categories"] == [c.CATEGORY]
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == (c.VERSION, True, True)
    assert version["subresources"] == {"status": {}}


def test_the_category_shadows_no_resource_name() -> None:
    # kubectl expands a category before it resolves a resource: a category spelt like a plural,
    # singular or short name would turn ``kubectl describe txntable NAME`` into all three kinds
    names = {
        n
        for crd in CRDS.values()
        for n in (
            crd["spec"]["names"]["plural"],
            crd["spec"]["names"]["singular"],
            crd["spec"]["names"]["kind"].lower(),
            *crd["spec"]["names"]["shortNames"],
        )
    }
    assert c.CATEGORY not in names


def test_short_names_are_unique() -> None:
    shorts = [s for crd in CRDS.values() for s in crd["spec"]["names"]["shortNames"]]
    assert len(shorts) == len(set(shorts))


# Short names kubectl already resolves in clusters where txntable lands: the built-in kinds and
# popular operators' CRDs. A clash makes ``kubectl get cpol`` pick one of the two silently.
_TAKEN = """
cm cs ep ev limits ns no pvc pv po rc quota sa svc ds deploy rs sts hpa cj csr ing netpol pdb pc
psp sc crd crds
cpol pol polr cpolr polex cleanpol ccleanpol ur admr cadmr bgscanr cbgscanr vpol ivpol gpol mpol
tt tb el ctb tr pr ct
prom smon pmon promrule am amcfg cert certs cr crs wf cwf wftmpl cwftmpl
app apps appproj appset ks hr gitrepo helmrepo hc ocirepo
k kt ku kc kctr kmm2 kb kr knp vs dr gw se ap pa ra so sj ta cta
ksvc kcfg rt rev cnp ccnp cep cn xrd comp sparkapp scheduledsparkapp
"""  # built-in; Kyverno; Tekton (+tkn); Prometheus, cert-manager, Argo; Flux; Strimzi, Istio,
# KEDA; Knative, Cilium, Crossplane, Spark operator
TAKEN_SHORT_NAMES = frozenset(_TAKEN.split())


def test_short_names_do_not_clash_with_well_known_ones() -> None:
    shorts = {s for crd in CRDS.values() for s in crd["spec"]["names"]["shortNames"]}
    assert shorts.isdisjoint(TAKEN_SHORT_NAMES), sorted(shorts & TAKEN_SHORT_NAMES)
    # the project's prefix keeps future clashes unlikely
    assert all(s.startswith("tx") for s in shorts), sorted(shorts)


@pytest.mark.parametrize("kind", KINDS)
def test_structural_schema_with_descriptions(kind: str) -> None:
    problems = []
    for path, node in nodes(schema_of(CRDS[kind])):
        unknown = set(node) - ALLOWED_KEYS
        if unknown:
            problems.append(f"{path}: unknown keys {sorted(unknown)}")
        if node.get("x-kubernetes-int-or-string"):
            if "type" in node or node.get("anyOf") != INT_OR_STRING:
                problems.append(f"{path}: int-or-string must be anyOf integer/string, no type")
        elif "type" not in node:
            problems.append(f"{path}: no type")
        elif "anyOf" in node:
            problems.append(f"{path}: anyOf only for int-or-string")
        is_map_value = path.endswith("{}")
        is_scalar_item = path.endswith("[]") and node.get("type") != "object"
        is_metadata = path == "metadata"  # may say nothing more (next test)
        if (
            not (is_map_value or is_scalar_item or is_metadata)
            and not node.get("description", "").strip()
        ):
            problems.append(f"{path or '<root>'}: no description")
        if node.get("additionalProperties") is False:
            problems.append(f"{path}: additionalProperties: false is not structural")
        if node.get("type") == "object" and "properties" in node and "additionalProperties" in node:
            problems.append(f"{path}: properties and additionalProperties are exclusive")
        for req in node.get("required", []):
            if req not in node.get("properties", {}):
                problems.append(f"{path}: required {req!r} is not a property")
    assert problems == []


@pytest.mark.parametrize("kind", KINDS)
def test_metadata_schema_is_only_its_type(kind: str) -> None:
    """kube-apiserver refuses a CRD whose root ``metadata`` schema says anything but its type
    and name/generateName rules ("must not specify anything other than name and generateName,
    but metadata is implicitly specified"): a description there made every install fail."""
    assert schema_of(CRDS[kind])["properties"]["metadata"] == {"type": "object"}


@pytest.mark.parametrize("kind", KINDS)
def test_lists_and_maps_are_bounded_for_cel_cost(kind: str) -> None:
    unbounded = [
        path
        for path, node in nodes(schema_of(CRDS[kind]))
        if (node.get("type") == "array" and "maxItems" not in node)
        or (isinstance(node.get("additionalProperties"), dict) and "maxProperties" not in node)
        or (path.endswith("{}") and "maxLength" not in node)
    ]
    assert unbounded == []


@pytest.mark.parametrize("kind", KINDS)
def test_defaults_validate_against_their_own_schema(kind: str) -> None:
    for path, node in nodes(schema_of(CRDS[kind])):
        if "default" in node:
            assert jsonschema.Draft7Validator(node).is_valid(node["default"]), path


@pytest.mark.parametrize("kind", KINDS)
def test_rules_compile_and_use_only_evaluable_functions(kind: str) -> None:
    rules = [
        (path, node, r)
        for path, node in nodes(schema_of(CRDS[kind]))
        for r in node.get("x-kubernetes-validations", [])
    ]
    assert rules, "every kind has CEL rules"
    for path, node, r in rules:
        # fieldPath: crdtools reports the error there, as the API server does
        assert set(r) <= {"rule", "message", "fieldPath"}, path
        if "fieldPath" in r:
            assert r["fieldPath"].removeprefix(".") in node["properties"], path
        assert r["message"].strip(), f"{path}: a rule needs a message"
        compile_rule(r["rule"])
        unknown = rule_functions(r["rule"]) - STANDARD_CEL - KUBERNETES_CEL
        assert not unknown, f"{path}: cel-python cannot evaluate {unknown}"


def test_location_is_immutable_by_a_transition_rule() -> None:
    location = schema_of(CRDS[c.KIND_TABLE])["properties"]["spec"]["properties"]["location"]
    rules = [r["rule"] for r in location["x-kubernetes-validations"]]
    assert "self == oldSelf" in rules


def _resolve(schema: dict[str, Any], json_path: str) -> dict[str, Any] | None:
    node = schema
    for part in re.findall(r"\.([A-Za-z]+)(\[\?\(@\.[A-Za-z]+==\"[A-Za-z]+\"\)\])?", json_path):
        name, filt = part
        props = node.get("properties", {})
        if name not in props:
            return None
        node = props[name]
        if filt:
            if node.get("type") != "array":
                return None
            node = node["items"]
    return node


@pytest.mark.parametrize("kind", KINDS)
def test_printer_columns_point_at_schema_fields(kind: str) -> None:
    (version,) = CRDS[kind]["spec"]["versions"]
    columns = version["additionalPrinterColumns"]
    names = [col["name"] for col in columns]
    assert names[:2] == ["Ready", "Phase"] and names.count("Age") == 1
    schema = schema_of(CRDS[kind])
    for col in columns:
        if col["jsonPath"] == ".metadata.creationTimestamp":
            continue
        node = _resolve(schema, col["jsonPath"])
        assert node is not None, col
        expected = {
            "date": "string",
            "string": "string",
            "integer": "integer",
            "boolean": "boolean",
        }
        assert node.get("type") == expected[col["type"]], col
        if col["type"] == "date":
            assert node.get("format") == "date-time", col
    assert '.status.conditions[?(@.type=="Ready")].status' in [c["jsonPath"] for c in columns]


def test_table_printer_columns_as_the_issue_asks() -> None:
    (version,) = CRDS[c.KIND_TABLE]["spec"]["versions"]
    shown = [col["name"] for col in version["additionalPrinterColumns"] if not col.get("priority")]
    assert shown == ["Ready", "Phase", "Version", "Files", "Small files", "Last compaction", "Age"]


CREDENTIAL_FIELD = re.compile(r"(?i)(secret|passw|token|credential|access.?key|private.?key)")


@pytest.mark.parametrize("kind", KINDS)
def test_no_inline_credential_fields(kind: str) -> None:
    for path, _node in nodes(schema_of(CRDS[kind])):
        leaf = re.split(r"[.\[\]{}]+", path.rstrip("[]{}"))[-1] if path else ""
        if leaf == "secretRef" or path.startswith("status"):
            continue
        assert not CREDENTIAL_FIELD.search(leaf), f"{path} looks like an inline credential"


@pytest.mark.parametrize("kind", KINDS)
def test_every_option_map_rejects_credentials_with_the_models_rule(kind: str) -> None:
    maps = [
        (path, node)
        for path, node in nodes(schema_of(CRDS[kind]))
        if path.endswith(("storage.options", "sparkConf"))
    ]
    assert maps
    for path, node in maps:
        rules = [r["rule"] for r in node.get("x-kubernetes-validations", [])]
        expected = [SECRET_RULE]
        if path.endswith("sparkConf"):  # also the keys the run builders set (issue 23.5)
            expected.append(RESERVED_SPARK_CONF_RULE)
        assert rules == expected, path


@pytest.mark.parametrize("key", SPARK_CONF_KEYS)
def test_reserved_spark_conf_cel_model_and_launcher_agree(key: str) -> None:
    reserved = is_reserved_spark_conf(key)
    assert reserved is (
        key in RESERVED_SPARK_CONF or key.startswith("spark.kubernetes.authenticate.")
    )
    cel_ok = compile_rule(RESERVED_SPARK_CONF_RULE).evaluate(
        {"self": celpy.json_to_cel({key: "x"})}
    )
    assert bool(cel_ok) is not reserved
    template = {"sparkConf": {key: "x"}}
    if reserved:
        with pytest.raises(InvalidSpecError, match="sets itself"):
            from_obj(SparkTemplate, template, "spark")
    else:
        from_obj(SparkTemplate, template, "spark")
    # the launcher refuses the same keys (a request built by other means than a policy)
    request = {
        "kind": "optimize", "backend": "Local", "namespace": "ns", "table": "t",
        "table_uid": "u", "policy": "p", "table_uri": "/t", "spark_conf": {key: "x"},
        "scheduled_time": datetime(2026, 1, 1, tzinfo=UTC),
    }  # fmt: skip
    if reserved:
        with pytest.raises(PermanentLaunchError, match="set by txntable"):
            RunRequest(**request)
    else:
        RunRequest(**request)


def test_the_schedule_rule_is_the_models() -> None:
    schedule = schema_of(CRDS[c.KIND_COMPACTION_POLICY])["properties"]["spec"]["properties"][
        "triggers"
    ]["properties"]["schedule"]
    assert [r["rule"] for r in schedule["x-kubernetes-validations"]] == [CRON_BACKWARDS_RULE]


def test_the_ceiling_rule_is_the_models() -> None:
    spark = schema_of(CRDS[c.KIND_COMPACTION_POLICY])["properties"]["spec"]["properties"]["spark"]
    assert [r["rule"] for r in spark["x-kubernetes-validations"]] == [CEILING_RULE]


@pytest.mark.parametrize("key", SECRET_KEYS + HARMLESS_KEYS)
def test_secret_option_names_cel_and_model_agree(key: str) -> None:
    expected = key in SECRET_KEYS
    assert is_secret_option(key) is expected
    cel_ok = compile_rule(SECRET_RULE).evaluate({"self": celpy.json_to_cel({key: "x"})})
    assert bool(cel_ok) is not expected


@pytest.mark.parametrize("kind", KINDS)
def test_models_and_yaml_agree(kind: str) -> None:
    spec_cls, status_cls = MODELS[kind]
    props = schema_of(CRDS[kind])["properties"]
    assert compare(spec_cls, props["spec"], "spec") == []
    assert compare(status_cls, props["status"], "status") == []


def test_compare_notices_drift() -> None:
    """The agreement check is not vacuous: a changed default, bound or enum is reported."""
    spec = schema_of(CRDS[c.KIND_COMPACTION_POLICY])["properties"]["spec"]
    drifted = {**spec, "properties": {**spec["properties"]}}
    drifted["properties"]["minInputFiles"] = {**spec["properties"]["minInputFiles"], "default": 3}
    policy = spec["properties"]["concurrencyPolicy"]
    drifted["properties"]["concurrencyPolicy"] = {**policy, "enum": ["Forbid", "Replace", "Allow"]}
    drifted["properties"]["targetFileSize"] = {
        **spec["properties"]["targetFileSize"],
        "default": "1Gi",
    }
    drifted["properties"]["extra"] = {"type": "string", "description": "x"}
    problems = "\n".join(compare(CompactionPolicySpec, drifted, "spec"))
    for needle in (
        "minInputFiles: default",
        "concurrencyPolicy: enum",
        "targetFileSize: default",
        "extra",
    ):
        assert needle in problems
