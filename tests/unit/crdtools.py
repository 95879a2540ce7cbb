"""Validate manifests against the CRDs without an API server: what kube-apiserver would do.

* structural defaulting (defaults of absent fields, recursively, as the API server applies them);
* strict field validation (unknown fields rejected, as ``kubectl apply`` does by default);
* the OpenAPI v3 schema with ``jsonschema``, plus the list semantics the API server adds
  (``x-kubernetes-list-type: set`` / ``map`` keys must be unique);
* every ``x-kubernetes-validations`` CEL rule with ``cel-python`` (``celpy``), with ``oldSelf``
  for transition rules when an old object is given.

cel-python implements standard CEL, not the Kubernetes CEL libraries. The only Kubernetes
library our rules use is the quantity library (``quantity()``, ``compareTo`` ...); it is
provided here on top of ``txntable.api.quantity``, keeping the form kube-apiserver keeps each
quantity in (an int64 or a decimal: ``asInteger()`` fails on a decimal such as ``1.5Gi``, as
the real server's does). ``rule_functions`` lists every function a rule calls so a test can
prove none is left unevaluated.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from decimal import ROUND_UP, Decimal
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import yaml
from celpy import celtypes

from txntable.api.quantity import QuantityError, parse_quantity

REPO = Path(__file__).resolve().parents[2]
CRD_DIR = REPO / "crds"
EXAMPLES = REPO / "examples"
MISSING: Any = object()

# Standard CEL functions/macros cel-python evaluates natively, and the Kubernetes quantity
# library implemented below. Anything else in a rule fails test_crds.
STANDARD_CEL = {
    "has", "all", "exists", "exists_one", "map", "filter", "size", "matches",
    "startsWith", "endsWith", "contains", "string", "int", "uint", "double", "bool", "type",
}  # fmt: skip
KUBERNETES_CEL = {
    "quantity", "isQuantity", "compareTo", "isGreaterThan", "isLessThan", "isInteger",
    "asInteger", "asApproximateFloat", "sign",
}  # fmt: skip


def load_crds() -> dict[str, dict[str, Any]]:
    """kind -> CRD document, for every file in crds/."""
    out = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        out[doc["spec"]["names"]["kind"]] = doc
    return out


def schema_of(crd: dict[str, Any]) -> dict[str, Any]:
    """The openAPIV3Schema of the CRD's only version."""
    (version,) = crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def load_examples() -> list[tuple[Path, dict[str, Any]]]:
    """Every YAML document under examples/, with its file."""
    docs = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        docs.extend((path, d) for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


# ----------------------------------------------------------------------------- defaulting


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """Return ``value`` with schema defaults filled in, as the API server defaults objects."""
    value = copy.deepcopy(value)
    _default(schema, value)
    return value


def _default(schema: dict[str, Any], value: Any) -> None:
    if isinstance(value, dict):
        for key, sub in schema.get("properties", {}).items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                _default(sub, value[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for item in value.values():
                _default(extra, item)
    elif isinstance(value, list) and "items" in schema:
        for item in value:
            _default(schema["items"], item)


# ----------------------------------------------------------------------------- schema


def strict(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy that rejects unknown fields (``kubectl apply``'s strict field validation)."""
    out = copy.deepcopy(schema)

    def walk(node: dict[str, Any]) -> None:
        if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
            node["additionalProperties"] = False
        for sub in node.get("properties", {}).values():
            walk(sub)
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"])
        if "items" in node:
            walk(node["items"])

    walk(out)
    return out


def schema_errors(schema: dict[str, Any], obj: Any) -> list[str]:
    """OpenAPI and list-type violations, as ``path: message`` lines."""
    validator = jsonschema.Draft7Validator(strict(schema))
    errors = [
        f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}"
        for e in validator.iter_errors(obj)
    ]
    errors.extend(_list_errors(schema, obj, ""))
    return errors


def _list_errors(schema: dict[str, Any], value: Any, path: str) -> Iterator[str]:
    if isinstance(value, dict):
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                yield from _list_errors(sub, value[key], f"{path}.{key}".lstrip("."))
    elif isinstance(value, list):
        kind = schema.get("x-kubernetes-list-type")
        keys = schema.get("x-kubernetes-list-map-keys", [])
        seen: list[Any] = []
        for i, item in enumerate(value):
            ident = tuple(item.get(k) for k in keys) if kind == "map" else item
            if kind in ("set", "map") and ident in seen:
                yield f"{path}[{i}]: Duplicate value: {ident!r}"
            seen.append(ident)
            yield from _list_errors(schema.get("items", {}), item, f"{path}[{i}]")


# ----------------------------------------------------------------------------- CEL


_INT64_MAX = 2**63 - 1
_BINARY_EXP = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_EXP = {"": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


class _Quantity:
    """A Kubernetes quantity inside cel-python (the apiserver's quantity library): its exact
    value, and ``form``, how kube-apiserver keeps it: ``(value, scale)`` when it holds an int64
    times a power of ten, None when it holds a decimal (``inf.Dec``). The form decides what
    ``isInteger``/``asInteger`` say and how ``asApproximateFloat`` rounds."""

    def __init__(self, value: Decimal, form: tuple[int, int] | None) -> None:
        self.value = value
        self.form = form


def _server_form(text: str) -> tuple[int, int] | None:
    """The form apimachinery's ``resource.ParseQuantity`` gives ``text``, for what the CRDs'
    quantity pattern admits (digits, an optional fraction, a suffix): a binary suffix with a
    fraction, or more digits than its precision allows, makes a decimal."""
    match = re.fullmatch(r"0*([0-9]*)(?:\.([0-9]*))?([A-Za-z]*)", text)
    if match is None:
        return None
    num, denom, suffix = match[1] or "0", match[2] or "", match[3]
    if suffix in _BINARY_EXP:
        exp = _BINARY_EXP[suffix]
        if denom or 15 - len(num) - exp * 3 // 10 - 1 < 0:
            return None
        value = int(num) << exp
        return (value, 0) if value <= _INT64_MAX else None
    if suffix not in _DECIMAL_EXP or 18 - len(num) - len(denom) < 0:
        return None
    scale = _DECIMAL_EXP[suffix] - len(denom)
    return (int(num + denom), scale) if scale >= -9 else None


def _quantity(text: Any) -> _Quantity:
    try:
        return _Quantity(parse_quantity(str(text)), _server_form(str(text)))
    except QuantityError as exc:
        raise ValueError(f"quantity: {exc}") from exc


def _is_quantity(text: Any) -> celtypes.BoolType:
    try:
        parse_quantity(str(text))
    except QuantityError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _cmp(a: _Quantity, b: _Quantity) -> celtypes.IntType:
    return celtypes.IntType((a.value > b.value) - (a.value < b.value))


def _is_integer(a: _Quantity) -> bool:
    """``Quantity.AsInt64``: only the int64 form, at a scale >= 0, without overflow."""
    return a.form is not None and a.form[1] >= 0 and a.form[0] * 10 ** a.form[1] <= _INT64_MAX


def _as_integer(a: _Quantity) -> celtypes.IntType:
    if not _is_integer(a):
        raise ValueError("cannot convert value to integer")
    return celtypes.IntType(int(a.value))


def _as_approximate_float(a: _Quantity) -> celtypes.DoubleType:
    """``Quantity.AsApproximateFloat64``: the int64 form times a power of ten; a decimal is
    kept rounded up to nano units, its unscaled integer made a float and scaled by 1e-9."""
    if a.form is not None:
        value, scale = a.form
        return celtypes.DoubleType(float(value) * float(10**scale) if scale else float(value))
    unscaled = int((a.value * 10**9).to_integral_value(rounding=ROUND_UP))
    return celtypes.DoubleType(float(unscaled) * 1e-9)


K8S_FUNCTIONS = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "compareTo": _cmp,
    "isGreaterThan": lambda a, b: celtypes.BoolType(a.value > b.value),
    "isLessThan": lambda a, b: celtypes.BoolType(a.value < b.value),
    "isInteger": lambda a: celtypes.BoolType(_is_integer(a)),
    "asInteger": _as_integer,
    "asApproximateFloat": _as_approximate_float,
    "sign": lambda a: celtypes.IntType((a.value > 0) - (a.value < 0)),
}
_ENV = celpy.Environment()
_PROGRAMS: dict[str, Any] = {}


def compile_rule(rule: str) -> Any:
    """Compile a rule once (raises on syntax errors)."""
    if rule not in _PROGRAMS:
        _PROGRAMS[rule] = _ENV.program(_ENV.compile(rule), functions=K8S_FUNCTIONS)
    return _PROGRAMS[rule]


def rule_functions(rule: str) -> set[str]:
    """Names the rule calls as functions or methods (string literals removed first)."""
    code = re.sub(r"'[^']*'|\"[^\"]*\"", "''", rule)
    return set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(", code))


class CelEvaluationError(AssertionError):
    """A rule could not be evaluated: a bug in the rule or in this harness, never a pass."""


def cel_errors(schema: dict[str, Any], obj: Any, old: Any = MISSING) -> list[str]:
    """Messages of every CEL rule that evaluates to false, as ``path: message``."""
    return list(_cel(schema, obj, old, ""))


def _cel(schema: dict[str, Any], value: Any, old: Any, path: str) -> Iterator[str]:
    for spec in schema.get("x-kubernetes-validations", []):
        rule = spec["rule"]
        if "oldSelf" in rule and old is MISSING:
            continue  # transition rules run only on updates
        activation = {"self": celpy.json_to_cel(value)}
        if old is not MISSING:
            activation["oldSelf"] = celpy.json_to_cel(old)
        try:
            result = compile_rule(rule).evaluate(activation)
        except Exception as exc:
            raise CelEvaluationError(f"{path}: rule {rule!r} failed to evaluate: {exc}") from exc
        if isinstance(result, Exception) or not isinstance(result, celtypes.BoolType):
            raise CelEvaluationError(f"{path}: rule {rule!r} gave {result!r}")
        if not result:  # fieldPath: where the API server reports it, below the rule's node
            yield f"{path}{spec.get('fieldPath', '')}: {spec['message']}"
    if isinstance(value, dict):
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                was = old.get(key, MISSING) if isinstance(old, dict) else MISSING
                yield from _cel(sub, value[key], was, f"{path}.{key}".lstrip("."))
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, item in value.items():
                yield from _cel(extra, item, MISSING, f"{path}[{key}]")
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            yield from _cel(schema["items"], item, MISSING, f"{path}[{i}]")


def validate(crd: dict[str, Any], obj: Any, old: Any = MISSING) -> list[str]:
    """What the API server says about ``obj``: schema errors first, then CEL rule messages."""
    schema = schema_of(crd)
    obj = apply_defaults(schema, obj)
    errors = schema_errors(schema, obj)
    if errors:
        return errors
    if old is not MISSING:
        old = apply_defaults(schema, old)
    return cel_errors(schema, obj, old)
