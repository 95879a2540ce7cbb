"""The CRDs are strict, structural and self-describing, and agree with ``txntable.api``.

The YAML in crds/ is hand-maintained; these tests are what keep it honest: every property
has a type and a description, no unknown schema keywords, bounded lists and maps (CEL cost),
printer columns that point at real fields, rules that cel-python can evaluate, and field
names, requiredness, enums, defaults and bounds equal to the Python models'.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from enum import Enum
from typing import Any, get_args, get_origin

import celpy
import jsonschema
import pytest

from tests.unit.crdtools import (
    KUBERNETES_CEL,
    STANDARD_CEL,
    compile_rule,
    load_crds,
    rule_functions,
    schema_of,
)
from txntable.api import constants as c
from txntable.api._codec import DURATION, SIZE, hints, json_name, unwrap_optional
from txntable.api.common import SECRET_RULE, PolicyStatus, is_secret_option
from txntable.api.conditions import REASON_PATTERN, TYPE_PATTERN, Condition
from txntable.api.policies import CheckpointPolicySpec, CompactionPolicySpec
from txntable.api.quantity import parse_bytes, parse_duration
from txntable.api.table import TxnTableSpec, TxnTableStatus

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


def test_short_names_are_unique() -> None:
    shorts = [s for crd in CRDS.values() for s in crd["spec"]["names"]["shortNames"]]
    assert len(shorts) == len(set(shorts))


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
        if not (is_map_value or is_scalar_item) and not node.get("description", "").strip():
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
        (path, r)
        for path, node in nodes(schema_of(CRDS[kind]))
        for r in node.get("x-kubernetes-validations", [])
    ]
    assert rules, "every kind has CEL rules"
    for path, r in rules:
        assert set(r) <= {"rule", "message"}, path
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
        assert rules == [SECRET_RULE], path


SECRET_KEYS = [
    "AWS_SECRET_ACCESS_KEY", "aws_access_key_id", "AWS_SESSION_TOKEN", "fs.s3a.secret.key",
    "fs.s3a.access.key", "spark.hadoop.fs.s3a.session.token", "azure_storage_account_key",
    "fs.azure.account.key.acct.dfs.core.windows.net", "google_service_account_key",
    "AZURE_STORAGE_SAS_TOKEN", "password", "client_secret", "key", "secret", "token",
    "spark.hadoop.fs.gs.auth.service.account.private.key", "fs.azure.account.key",
    "fs.azure.sas.fixed.token",
]  # fmt: skip
HARMLESS_KEYS = [
    "AWS_REGION", "AWS_ENDPOINT_URL", "AWS_ALLOW_HTTP", "spark.sql.shuffle.partitions",
    "fs.s3a.endpoint", "fs.s3a.bucket.lake.endpoint", "keys", "AWS_CONDITIONAL_PUT",
    "fs.azure.account.keyprovider.acct.dfs.core.windows.net", "fs.azure.sas.token.provider.type",
    "fs.azure.account.auth.type",
]  # fmt: skip


@pytest.mark.parametrize("key", SECRET_KEYS + HARMLESS_KEYS)
def test_secret_option_names_cel_and_model_agree(key: str) -> None:
    expected = key in SECRET_KEYS
    assert is_secret_option(key) is expected
    cel_ok = compile_rule(SECRET_RULE).evaluate({"self": celpy.json_to_cel({key: "x"})})
    assert bool(cel_ok) is not expected


# --------------------------------------------------------------------- models vs YAML

BOUNDS = {
    "minimum": "minimum", "maximum": "maximum", "pattern": "pattern",
    "min_length": "minLength", "max_length": "maxLength",
}  # fmt: skip


def _field_default(field: dataclasses.Field[Any]) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def _compare_scalar(
    tp: Any, meta: Mapping[str, Any], node: dict[str, Any], where: str
) -> list[str]:
    out = []
    kind = meta.get("kind")
    if kind == SIZE:
        ok = node.get("x-kubernetes-int-or-string") is True
    elif (
        kind == DURATION or tp in (str, datetime) or (isinstance(tp, type) and issubclass(tp, Enum))
    ):
        ok = node.get("type") == "string"
    else:
        ok = node.get("type") == {bool: "boolean", int: "integer"}.get(tp)
    if not ok:
        out.append(f"{where}: YAML type does not fit {tp} ({kind})")
    if tp is datetime and node.get("format") != "date-time":
        out.append(f"{where}: times need format date-time")
    if isinstance(tp, type) and issubclass(tp, Enum):
        if node.get("enum") != [m.value for m in tp]:
            out.append(f"{where}: enum {node.get('enum')} != {[m.value for m in tp]}")
    elif "enum" in node:
        out.append(f"{where}: YAML has an enum the model lacks")
    for py_key, yaml_key in BOUNDS.items():
        if meta.get(py_key) != node.get(yaml_key):
            out.append(f"{where}: {yaml_key} {node.get(yaml_key)!r} != model {meta.get(py_key)!r}")
    return out


def compare(cls: type, node: dict[str, Any], where: str) -> list[str]:
    """Differences between a dataclass and its object schema (names, required, defaults, ...)."""
    if cls is Condition:
        return _compare_condition(node, where)
    out: list[str] = []
    props = node.get("properties", {})
    fields = {json_name(f): f for f in dataclasses.fields(cls)}
    if set(props) != set(fields):
        out.append(
            f"{where}: only in YAML {sorted(set(props) - set(fields))}, "
            f"only in the model {sorted(set(fields) - set(props))}"
        )
    required = set(node.get("required", []))
    for name in sorted(set(props) & set(fields)):
        field, sub, at = fields[name], props[name], f"{where}.{name}"
        tp, _optional = unwrap_optional(hints(cls)[field.name])
        meta = field.metadata
        default = _field_default(field)
        if (default is dataclasses.MISSING) != (name in required):
            out.append(
                f"{at}: required in YAML={name in required}, model={default is dataclasses.MISSING}"
            )
        out.extend(_compare_default(tp, meta, default, sub, at))
        if dataclasses.is_dataclass(tp):
            out.extend(compare(tp, sub, at))  # type: ignore[arg-type]
        elif get_origin(tp) is tuple:
            (item_tp,) = get_args(tp)[:1]
            if sub.get("type") != "array":
                out.append(f"{at}: not an array")
                continue
            for py_key, yaml_key in (("min_items", "minItems"), ("max_items", "maxItems")):
                if meta.get(py_key) != sub.get(yaml_key):
                    out.append(f"{at}: {yaml_key} {sub.get(yaml_key)} != {meta.get(py_key)}")
            items = sub["items"]
            if dataclasses.is_dataclass(item_tp):
                out.extend(compare(item_tp, items, f"{at}[]"))  # type: ignore[arg-type]
            else:
                item_meta = {
                    k: v for k, v in meta.items() if k in ("pattern", "min_length", "max_length")
                }
                out.extend(_compare_scalar(item_tp, item_meta, items, f"{at}[]"))
        elif get_origin(tp) is Mapping or tp is Mapping:
            extra = sub.get("additionalProperties", {})
            if sub.get("type") != "object" or extra.get("type") != "string":
                out.append(f"{at}: not a string map")
            if meta.get("max_items") != sub.get("maxProperties"):
                out.append(
                    f"{at}: maxProperties {sub.get('maxProperties')} != {meta.get('max_items')}"
                )
            if meta.get("max_length") != extra.get("maxLength"):
                out.append(
                    f"{at}: value maxLength {extra.get('maxLength')} != {meta.get('max_length')}"
                )
        else:
            out.extend(_compare_scalar(tp, meta, sub, at))
    return out


def _compare_default(
    tp: Any, meta: Mapping[str, Any], default: Any, sub: dict[str, Any], at: str
) -> list[str]:
    yaml_default = sub.get("default", dataclasses.MISSING)
    if (
        default is dataclasses.MISSING
        or default is None
        or default == ()
        or (isinstance(default, Mapping) and not default)
    ):
        if yaml_default is not dataclasses.MISSING:
            return [f"{at}: YAML default {yaml_default!r} but the model has none"]
        return []
    if dataclasses.is_dataclass(default):
        return [] if yaml_default == {} else [f"{at}: object default must be {{}} in YAML"]
    if yaml_default is dataclasses.MISSING:
        return [f"{at}: model default {default!r} missing in YAML"]
    if meta.get("kind") in (SIZE, DURATION):
        parse = parse_bytes if meta["kind"] == SIZE else parse_duration
        if meta.get("text_default") != yaml_default or parse(yaml_default) != default:
            return [f"{at}: default {yaml_default!r} != model {meta.get('text_default')!r}"]
        return []
    value = default.value if isinstance(default, Enum) else default
    return [] if value == yaml_default else [f"{at}: default {yaml_default!r} != model {value!r}"]


def _compare_condition(node: dict[str, Any], where: str) -> list[str]:
    names = {json_name(f) for f in dataclasses.fields(Condition)}
    out = [] if set(node["properties"]) == names else [f"{where}: condition fields differ"]
    if node["properties"]["reason"]["pattern"] != REASON_PATTERN.pattern:
        out.append(f"{where}.reason: pattern differs from conditions.REASON_PATTERN")
    if node["properties"]["type"]["pattern"] != TYPE_PATTERN.pattern:
        out.append(f"{where}.type: pattern differs from conditions.TYPE_PATTERN")
    if set(node["required"]) != names - {"observedGeneration"}:
        out.append(f"{where}: required differs")
    return out


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
