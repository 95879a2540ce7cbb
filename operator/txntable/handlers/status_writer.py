"""The one writer of a TxnTable's status, and of a policy's, for every driver and both modes.

Status used to be written two ways: the Kopf timer through Kopf's ``patch.status``, the
commit-events daemon with its own API call, each computing its JSON merge patch and its
"changed?" against the body Kopf had handed it. Kopf's body is the object as the last watch
event showed it, so it may lag behind what this very process wrote a moment before (under load,
for several ticks). A tick that read a stale body then patched against the wrong base: a field
the newest status had and the stale one had not (``status.plan`` written by the daemon) was not
sent as null and stayed; a status equal to the stale body was judged unchanged and not written,
leaving the newer, now wrong, one on the server until the body caught up and a later tick ran.

``StatusWriter`` owns both the merge patch and the change detection, computed against the
newest status known for the table: the body's, unless the body is one this process has already
written over (its resourceVersion is one a write of ours was based on, or older than the one our
write got where the server's resourceVersions are comparable integers), in which case what the
server answered to that write (a ``Written`` sub-record of the table's ``TableMemory``, dropped by
``forget``). Transports: the status subresource of the Kubernetes API in the cluster
(``KubeStatus``, for the timer, the daemon and the validate handler alike) and a dict in local
mode (``MemoryStatus``, where ``txntable run --local`` keeps statuses). A write the API refuses
(403, 404, 409, 5xx, no connection) is logged and not remembered: the status is still different
from the newest known one, so the table's next tick writes it again. Policies' statuses go
through the same writer (``handlers.policy_driver``, one per kind, each with a ``KubeStatus`` of
its kind's plural): what is said here of a table holds for a policy.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from txntable.api.constants import GROUP, PLURAL_TABLE, VERSION
from txntable.controller.memory import TableMemories

log = logging.getLogger(__name__)

#: resourceVersions of bodies known to be older than the last write, kept per table
_OLDER_KEPT = 16


class StatusNotWritten(Exception):  # noqa: N818 - what happened, as the log says it
    """The transport could not write the status (refused, or no answer)."""


@dataclass(frozen=True, slots=True)
class Stored:
    """The status as the store holds it after a write, and its resourceVersion (if any)."""

    status: dict[str, Any]
    resource_version: str | None = None


class StatusTransport(Protocol):
    """Where statuses go: ``patch`` applies a JSON merge patch (RFC 7386) to the status of the
    table ``key`` (``namespace/name``) and returns the stored result, or raises
    ``StatusNotWritten``."""

    def patch(self, key: str, namespace: str, name: str, patch: dict[str, Any]) -> Stored: ...


@runtime_checkable
class KeepsStatuses(Protocol):
    """A transport that is its own store (local mode's ``MemoryStatus``): what it keeps of an
    object goes when the object is forgotten."""

    def drop(self, key: str) -> None: ...


class WriteResult(enum.Enum):
    WRITTEN = "written"
    UNCHANGED = "unchanged"
    REFUSED = "refused"


@dataclass
class Written:
    """One table's sub-record (``controller.memory``): what this process last wrote."""

    #: the status the store answered with, until a body at least as new is seen (None
    #: before the first write, and once the bodies have caught up)
    status: dict[str, Any] | None = None
    resource_version: str | None = None
    #: resourceVersions of bodies known to be older than ``status``
    older: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Current:
    """What the caller read of the object: its status and its resourceVersion."""

    status: Mapping[str, Any]
    resource_version: str | None = None

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> Current:
        meta = body.get("metadata") or {}
        return cls(dict(body.get("status") or {}), meta.get("resourceVersion"))


class StatusWriter:
    """Writes a table's status when it changed, against the newest status known for it."""

    def __init__(self, memories: TableMemories, transport: StatusTransport) -> None:
        self.memories = memories
        self.transport = transport
        if isinstance(transport, KeepsStatuses):  # its statuses go with the object's memory
            keeps = transport
            memories.on_forget(lambda key, _: keeps.drop(key))

    def newest(self, key: str, current: Current) -> Mapping[str, Any]:
        """The newest status known for ``key``: ``current`` unless it is older than a write of
        this process (the body Kopf handed over has not caught up with it yet)."""
        written = self.memories.peek(key, Written)
        if written is None or written.status is None:
            return current.status
        if current.resource_version is not None and current.resource_version in written.older:
            return written.status
        order = compare_resource_versions(current.resource_version, written.resource_version)
        if order is not None and order < 0:
            # a body older than our write that no write of ours was based on: one made between
            # the body our write read and the write (Kopf adding its finalizer to a new table),
            # whose watch event came late under load
            return written.status
        # the body has caught up with the last write, and the next bodies are newer still:
        # until the next write, the status kept for a lagging body is never needed again
        # (it was a copy of every table's status in the controller's memory)
        written.status = None
        return current.status

    def write(
        self,
        key: str,
        namespace: str,
        name: str,
        current: Current,
        status: dict[str, Any],
        *,
        whole: bool = True,
    ) -> WriteResult:
        """Write ``status`` unless the newest known status already says it. ``whole``: it is
        the whole status, so fields it lacks are deleted; else only its fields are set (an
        invalid spec's condition keeps the rest)."""
        base = self.newest(key, current)
        patch = merge_patch(base, status) if whole else dict(status)
        if not changed(base, patch):
            return WriteResult.UNCHANGED
        try:
            stored = self.transport.patch(key, namespace, name, patch)
        except StatusNotWritten as exc:
            why = f"status of {namespace}/{name} not written ({exc}): the next tick tries again"
            log.warning(why)
            return WriteResult.REFUSED
        written = self.memories.of(key, Written)
        older = [v for v in (current.resource_version, written.resource_version) if v]
        written.older = [v for v in [*written.older, *older] if v != stored.resource_version]
        written.older = list(dict.fromkeys(written.older))[-_OLDER_KEPT:]
        written.status, written.resource_version = stored.status, stored.resource_version
        return WriteResult.WRITTEN


def compare_resource_versions(a: str | None, b: str | None) -> int | None:
    """-1, 0 or 1 as resourceVersion ``a`` is older than, the same as or newer than ``b`` (of
    one object), or None when they cannot be compared. API servers from Kubernetes 1.35 promise
    that resourceVersions are comparable, as positive integers without leading zeros (KEP-5504);
    older etcd-backed servers already make them so. Anything else is taken for opaque, as the
    API conventions said before, and compared for equality only (the caller's ``older`` list)."""
    if a is None or b is None or not (_comparable(a) and _comparable(b)):
        return None
    ka, kb = (len(a), a), (len(b), b)
    return (ka > kb) - (ka < kb)


def _comparable(version: str) -> bool:
    return version.isascii() and version.isdigit() and version[0] != "0"


def changed(current: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether applying ``new`` (a patch) to ``current`` changes anything at the top level."""
    return any(current.get(k) != v for k, v in new.items())


def merge_patch(current: Any, new: dict[str, Any]) -> dict[str, Any]:
    """``new`` as a JSON merge patch over ``current`` (how status is patched): a field the new
    status no longer has (``status.plan`` once no policy applies, ``backOffUntil`` once a
    back-off ended, a finished run's message) is sent as null, which deletes it; else the
    patch would keep it."""
    if not isinstance(current, Mapping):
        return new
    out: dict[str, Any] = dict(new)
    for k, old in current.items():
        if k not in new:
            out[k] = None
        elif isinstance(old, Mapping) and isinstance(new[k], dict):
            out[k] = merge_patch(old, new[k])
    return out


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: ``patch`` applied to ``target`` as the API server applies it."""
    if not isinstance(patch, Mapping):
        return patch
    out = dict(target) if isinstance(target, Mapping) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = apply_merge_patch(out.get(k), v)
    return out


class KubeStatus:
    """The cluster's transport: the status subresource of the objects of ``plural`` (TxnTables
    by default; a policy driver's writers write the policies'), through the API client."""

    def __init__(self, api_client: Any, plural: str = PLURAL_TABLE) -> None:
        self.api_client = api_client
        self.plural = plural

    def patch(self, key: str, namespace: str, name: str, patch: dict[str, Any]) -> Stored:
        del key  # the API names the object by namespace and name
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            got = client.CustomObjectsApi(self.api_client).patch_namespaced_custom_object_status(
                GROUP, VERSION, namespace, self.plural, name, {"status": patch}
            )
        except ApiException as exc:
            raise StatusNotWritten(f"HTTP {exc.status} {exc.reason or ''}".rstrip()) from None
        except (HTTPError, OSError) as exc:  # no connection, no answer
            raise StatusNotWritten(type(exc).__name__) from None
        got = got if isinstance(got, dict) else {}
        meta = got.get("metadata") or {}
        return Stored(dict(got.get("status") or {}), meta.get("resourceVersion"))


class MemoryStatus:
    """Local mode's transport: statuses in a dict by object key, as ``run --local`` keeps them
    (its API server is this dict; an object gone from the manifests is dropped with ``drop``,
    which the writers over it call when the object is forgotten: ``KeepsStatuses``)."""

    def __init__(self) -> None:
        self.statuses: dict[str, dict[str, Any]] = {}
        self._writes = 0

    def patch(self, key: str, namespace: str, name: str, patch: dict[str, Any]) -> Stored:
        del namespace, name
        self.statuses[key] = apply_merge_patch(self.statuses.get(key, {}), patch)
        self._writes += 1
        return Stored(self.statuses[key], str(self._writes))

    def read(self, key: str) -> Current:
        """What a local tick reads of the table, as a body would show it."""
        return Current(self.statuses.get(key, {}))

    def drop(self, key: str) -> None:
        self.statuses.pop(key, None)
