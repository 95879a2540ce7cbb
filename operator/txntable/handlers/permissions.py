"""Every Kubernetes API permission the controller process needs, and where it needs it.

This is the one list the Helm chart's RBAC is checked against (``tests/unit/deploy/test_chart.py``):
the rendered Roles and ClusterRoles of the controller may grant nothing outside
``controller_permissions()`` and must grant all of it in the right scope. It extends the
launchers' own list (``txntable.launch.permissions``, which stays launch-only) with what Kopf
and the handlers call: watching and patching our resources and their status, events,
peering, CRD discovery, and reading the Secret a TxnTable references.

Scopes say where a permission applies, so the chart can stay namespaced by default:

* ``TABLES``: the namespaces holding TxnTables (a Role in each watched namespace, or one
  ClusterRole for a cluster-wide install);
* ``SECRETS``: like ``TABLES`` but kept apart, so the chart can narrow it to named Secrets,
  to fewer namespaces, or drop it when storage needs no credentials;
* ``PEERING``: the watched namespaces of a namespaced install (Kopf's KopfPeering), only
  without shards;
* ``CLUSTER_WIDE``: cluster-scoped, only when the controller watches every namespace;
* ``CLUSTER_PEERING``: cluster-scoped, Kopf's ClusterKopfPeering, only for a cluster-wide
  install without shards;
* ``LEASES``: the controller's own namespace, only with shards (``handlers.shards``: the
  shards' and the members' Leases).

A namespaced install needs nothing cluster-scoped: it serves the namespaces it is given and
discovers the resources once at start (Kopf's scanning is off, ``kopf_startup.startup``).

Every verb here was seen used by the controller against a real API server, and nothing it
used was missing (``tests/controlplane/test_rbac.py`` reads the server's audit log); Kopf
never reads single objects (``get``): it lists, watches and patches.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Final

from txntable.api.common import Backend
from txntable.api.constants import (
    GROUP,
    PLURAL_CHECKPOINT_POLICY,
    PLURAL_COMPACTION_POLICY,
    PLURAL_TABLE,
)
from txntable.launch.permissions import Permission, launcher_permissions

__all__ = [
    "CONTROLLER",
    "KOPF_GROUP",
    "Scope",
    "controller_permissions",
]

#: Kopf's own API group (peering objects).
KOPF_GROUP: Final = "kopf.dev"

_WATCH: Final = ("list", "watch")


class Scope(StrEnum):
    """Where a permission is granted (see the module docstring)."""

    TABLES = "tables"
    SECRETS = "secrets"
    PEERING = "peering"
    CLUSTER_WIDE = "cluster-wide"
    CLUSTER_PEERING = "cluster-peering"
    LEASES = "leases"


_OWN_RESOURCES: Final = (PLURAL_TABLE, PLURAL_COMPACTION_POLICY, PLURAL_CHECKPOINT_POLICY)

#: What Kopf and the handlers call, beyond the launchers (``launch.permissions.LAUNCHERS``).
CONTROLLER: Final[tuple[tuple[Scope, Permission], ...]] = (
    # watch the resources; patch them (Kopf's finalizer, progress annotations)
    *((Scope.TABLES, Permission(GROUP, r, (*_WATCH, "patch"))) for r in _OWN_RESOURCES),
    # status is its own subresource: Kopf patches it separately
    *((Scope.TABLES, Permission(GROUP, f"{r}/status", ("patch",))) for r in _OWN_RESOURCES),
    # Kopf and the handlers post core v1 Events (never patch them, never events.k8s.io)
    (Scope.TABLES, Permission("", "events", ("create",))),
    # the storage credentials a TxnTable names in spec.storage.secretRef (read when observing)
    (Scope.SECRETS, Permission("", "secrets", ("get",))),
    # namespaced peering (Kopf uses KopfPeering in every watched namespace)
    (Scope.PEERING, Permission(KOPF_GROUP, "kopfpeerings", (*_WATCH, "patch"))),
    # cluster-wide: Kopf follows CRDs (resources appearing later) and peers through
    # ClusterKopfPeering; it does not follow namespaces when it serves them all
    (Scope.CLUSTER_WIDE, Permission("apiextensions.k8s.io", "customresourcedefinitions", _WATCH)),
    (Scope.CLUSTER_PEERING, Permission(KOPF_GROUP, "clusterkopfpeerings", (*_WATCH, "patch"))),
    # shards: each replica lists the set, creates and renews (replaces) its leases, and
    # deletes its member lease on the way out and those of replicas long dead
    (
        Scope.LEASES,
        Permission("coordination.k8s.io", "leases", ("list", "create", "update", "delete")),
    ),
)


def controller_permissions(
    backends: Iterable[Backend] = tuple(Backend),
) -> list[tuple[Scope, Permission]]:
    """Everything the controller needs: its own calls plus the launchers' (table namespaces)."""
    out = list(CONTROLLER)
    out += [(Scope.TABLES, p) for p in launcher_permissions(backends)]
    return out
