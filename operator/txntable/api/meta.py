"""The envelope of every manifest: apiVersion, kind, the metadata we use, spec and status.

Metadata from the API server carries many fields (managedFields, uid, ...); only the ones
txntable reads are kept, and unknown metadata is ignored rather than rejected.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

from txntable.api.constants import API_VERSION
from txntable.api.errors import InvalidSpecError

S = TypeVar("S")
T = TypeVar("T")
U = TypeVar("U")

#: The namespace of a resource whose manifest names none (local mode; kubectl's default).
DEFAULT_NAMESPACE = "default"


def resource_key(namespace: str | None, name: str, uid: str | None = None) -> str:
    """The key of one resource in the controller's caches and locks: its ``uid`` when the API
    server gave it one, else ``namespace/name`` (a manifest read in local mode), so two
    resources of one name in two namespaces never share state."""
    return uid or f"{namespace or DEFAULT_NAMESPACE}/{name}"


@dataclass(frozen=True)
class ObjectMeta:
    """Name, namespace, generation, uid, labels and annotations of a custom resource."""

    name: str
    namespace: str | None = None
    generation: int | None = None
    uid: str | None = None
    resource_version: str | None = None
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    annotations: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def namespaced_name(self) -> str:
        """``namespace/name``, the namespace defaulted, for people to read."""
        return f"{self.namespace or DEFAULT_NAMESPACE}/{self.name}"

    @property
    def key(self) -> str:
        """The resource's cache key (``resource_key``)."""
        return resource_key(self.namespace, self.name, self.uid)

    @classmethod
    def from_dict(cls, obj: object) -> ObjectMeta:
        """Read ``metadata``; a name is required, everything else is optional."""
        if not isinstance(obj, dict):
            raise InvalidSpecError("metadata", "must be an object")
        errors = []
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            errors.append(InvalidSpecError("metadata.name", "required"))
        labels = obj.get("labels") or {}
        if not isinstance(labels, dict):
            errors.append(InvalidSpecError("metadata.labels", "must be an object"))
        if errors:
            raise InvalidSpecError.combine(errors)
        name, labels = typing.cast(str, name), typing.cast(dict[Any, Any], labels)
        annotations = obj.get("annotations")
        notes = annotations if isinstance(annotations, dict) else {}
        generation = obj.get("generation")
        return cls(
            name=name,
            namespace=_opt_str(obj.get("namespace")),
            generation=generation if isinstance(generation, int) else None,
            uid=_opt_str(obj.get("uid")),
            resource_version=_opt_str(obj.get("resourceVersion")),
            labels=MappingProxyType({str(k): str(v) for k, v in labels.items()}),
            annotations=MappingProxyType({str(k): str(v) for k, v in notes.items()}),
        )


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def envelope(obj: object, kind: str) -> tuple[ObjectMeta, Any, Any]:
    """Check apiVersion and kind; return metadata, the raw spec and the raw status."""
    meta, spec, status = read_manifest(obj, kind, lambda raw: raw, lambda raw: raw)
    return meta, spec, status


def read_manifest(
    obj: object, kind: str, spec: Callable[[Any], S], status: Callable[[Any], U]
) -> tuple[ObjectMeta, S, U]:
    """Envelope, spec (parsed by ``spec``) and status of a manifest, checked together.

    Every problem is collected (a wrong apiVersion, a missing name, three bad spec fields) and
    raised as one ``InvalidSpecError``, the way the API server answers with all of them.
    """
    if not isinstance(obj, dict):
        raise InvalidSpecError("", f"a {kind} manifest must be an object")
    errors: list[InvalidSpecError] = []

    def attempt(fn: Callable[[Any], T], raw: Any) -> T | None:
        try:
            return fn(raw)
        except InvalidSpecError as exc:
            errors.append(exc)
            return None

    if obj.get("apiVersion") != API_VERSION:
        errors.append(InvalidSpecError("apiVersion", f"must be {API_VERSION}"))
    if obj.get("kind") != kind:
        errors.append(InvalidSpecError("kind", f"must be {kind}"))
    meta = attempt(ObjectMeta.from_dict, obj.get("metadata"))
    if "spec" not in obj:
        errors.append(InvalidSpecError("spec", "required"))
        parsed_spec = None
    else:
        parsed_spec = attempt(spec, obj["spec"])
    parsed_status = attempt(status, obj.get("status") or {})
    if errors:
        raise InvalidSpecError.combine(errors)
    return typing.cast(tuple[ObjectMeta, S, U], (meta, parsed_spec, parsed_status))
