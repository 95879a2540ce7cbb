"""Manifests of our three kinds for tests, one builder per kind, with keyword overrides.

Tests wrote each manifest dict by hand (64 dicts in 36 files): the envelope (apiVersion, kind,
metadata) repeated, and every new required field or renamed key had to be found in all of them.
A builder gives the envelope; a test names only what it is about. Spec fields are passed as
keywords spelled as in the CRD (``compactionPolicyRef={"name": "compact"}``), so what a test
writes is what a user's manifest says. ``metadata`` adds to or replaces the name and namespace
(``uid``, ``labels``, ``generation``, ``resourceVersion``); ``namespace=None`` leaves it out.
Each call returns a new dict, safe to change.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from txntable.api.constants import GROUP, VERSION

API_VERSION = f"{GROUP}/{VERSION}"


def _manifest(
    kind: str,
    name: str,
    namespace: str | None,
    metadata: Mapping[str, Any] | None,
    spec: dict[str, Any],
    status: Mapping[str, Any] | None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta.update(metadata or {})
    body: dict[str, Any] = {"apiVersion": API_VERSION, "kind": kind, "metadata": meta, "spec": spec}
    if status is not None:
        body["status"] = dict(status)
    return body


def table_manifest(
    name: str = "events",
    location: str | Path = "/nowhere",
    *,
    namespace: str | None = "default",
    metadata: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A TxnTable at ``location``; ``spec`` adds or replaces spec fields."""
    return _manifest(
        "TxnTable", name, namespace, metadata, {"location": str(location), **spec}, status
    )


def compaction_policy_manifest(
    name: str = "compact",
    *,
    namespace: str | None = "default",
    metadata: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A CompactionPolicy; its spec is only what ``spec`` gives (the CRD's defaults do the rest)."""
    return _manifest("CompactionPolicy", name, namespace, metadata, dict(spec), status)


def checkpoint_policy_manifest(
    name: str = "checkpoint",
    *,
    namespace: str | None = "default",
    metadata: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A CheckpointPolicy; its spec is only what ``spec`` gives."""
    return _manifest("CheckpointPolicy", name, namespace, metadata, dict(spec), status)
