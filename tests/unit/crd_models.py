"""Compare a model dataclass with its CRD object schema: the check behind test_crds.

Field names, requiredness, YAML types, enums, defaults (sizes and durations compared after
parsing) and bounds are derived from both sides; ``compare`` returns every difference.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime
from enum import Enum
from typing import Any, get_args, get_origin

from txntable.api._codec import DURATION, SIZE, hints, json_name, unwrap_optional
from txntable.api.conditions import REASON_PATTERN, TYPE_PATTERN, Condition
from txntable.api.quantity import parse_bytes, parse_duration

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
