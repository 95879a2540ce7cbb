"""The envelope of every manifest: apiVersion, kind, the metadata we use, spec and status.

Metadata from the API server carries many fields (managedFields, uid, ...); only the ones
txntable reads are kept, and unknown metadata is ignored rather than rejected.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from txntable.api.constants import API_VERSION
from txntable.api.errors import InvalidSpecError


@dataclass(frozen=True)
class ObjectMeta:
    """Name, namespace, generation, uid and labels of a custom resource."""

    name: str
    namespace: str | None = None
    generation: int | None = None
    uid: str | None = None
    resource_version: str | None = None
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def from_dict(cls, obj: object) -> ObjectMeta:
        """Read ``metadata``; a name is required, everything else is optional."""
        if not isinstance(obj, dict):
            raise InvalidSpecError("metadata", "must be an object")
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidSpecError("metadata.name", "required")
        labels = obj.get("labels") or {}
        if not isinstance(labels, dict):
            raise InvalidSpecError("metadata.labels", "must be an object")
        generation = obj.get("generation")
        return cls(
            name=name,
            namespace=_opt_str(obj.get("namespace")),
            generation=generation if isinstance(generation, int) else None,
            uid=_opt_str(obj.get("uid")),
            resource_version=_opt_str(obj.get("resourceVersion")),
            labels=MappingProxyType({str(k): str(v) for k, v in labels.items()}),
        )


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def envelope(obj: object, kind: str) -> tuple[ObjectMeta, Any, Any]:
    """Check apiVersion and kind; return metadata, the raw spec and the raw status."""
    if not isinstance(obj, dict):
        raise InvalidSpecError("", f"a {kind} manifest must be an object")
    if obj.get("apiVersion") != API_VERSION:
        raise InvalidSpecError("apiVersion", f"must be {API_VERSION}")
    if obj.get("kind") != kind:
        raise InvalidSpecError("kind", f"must be {kind}")
    meta = ObjectMeta.from_dict(obj.get("metadata"))
    if "spec" not in obj:
        raise InvalidSpecError("spec", "required")
    return meta, obj["spec"], obj.get("status") or {}
