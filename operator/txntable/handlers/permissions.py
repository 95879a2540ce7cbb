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
* ``PEERING``: the watched namespaces of a namespaced install (Kopf's KopfPeering);
* ``OWN``: the controller's own namespace only;
* ``CLUSTER``: cluster-scoped resources, needed in both modes (a ClusterRole);
* ``CLUSTER_WIDE``: only when the controller watches every namespace.
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

_WATCH: Final = ("get", "list", "watch")


class Scope(StrEnum):
    """Where a permission is granted (see the module docstring)."""

    TABLES = "tables"
    SECRETS = "secrets"
    PEERING = "peering"
    OWN = "own"
    CLUSTER = "cluster"
    CLUSTER_WIDE = "cluster-wide"


_OWN_RESOURCES: Final = (PLURAL_TABLE, PLURAL_COMPACTION_POLICY, PLURAL_CHECKPOINT_POLICY)

#: What Kopf and the handlers call, beyond the launchers (``launch.permissions.LAUNCHERS``).
CONTROLLER: Final[tuple[tuple[Scope, Permission], ...]] = (
    # watch the resources; patch them (Kopf's finalizer, progress annotations)
    *((Scope.TABLES, Permission(GROUP, r, (*_WATCH, "patch"))) for r in _OWN_RESOURCES),
    # status is its own subresource: Kopf patches it separately
    *((Scope.TABLES, Permission(GROUP, f"{r}/status", ("patch",))) for r in _OWN_RESOURCES),
    # Kopf posts events on the objects it handles (core v1), newer clients use events.k8s.io
    (Scope.TABLES, Permission("", "events", ("create", "patch"))),
    (Scope.TABLES, Permission("events.k8s.io", "events", ("create", "patch"))),
    # the storage credentials a TxnTable names in spec.storage.secretRef (read when observing)
    (Scope.SECRETS, Permission("", "secrets", ("get",))),
    # namespaced peering (Kopf uses KopfPeering in every watched namespace)
    (Scope.PEERING, Permission(KOPF_GROUP, "kopfpeerings", (*_WATCH, "patch"))),
    # leader leases live next to the controller
    (Scope.OWN, Permission("coordination.k8s.io", "leases", (*_WATCH, "patch"))),
    # Kopf discovers which resources are served by watching CRDs (read-only)
    (Scope.CLUSTER, Permission("apiextensions.k8s.io", "customresourcedefinitions", _WATCH)),
    # cluster-wide: Kopf follows namespaces and peers through ClusterKopfPeering
    (Scope.CLUSTER_WIDE, Permission("", "namespaces", _WATCH)),
    (Scope.CLUSTER_WIDE, Permission(KOPF_GROUP, "clusterkopfpeerings", (*_WATCH, "patch"))),
)


def controller_permissions(
    backends: Iterable[Backend] = tuple(Backend),
) -> list[tuple[Scope, Permission]]:
    """Everything the controller needs: its own calls plus the launchers' (table namespaces)."""
    out = list(CONTROLLER)
    out += [(Scope.TABLES, p) for p in launcher_permissions(backends)]
    return out
