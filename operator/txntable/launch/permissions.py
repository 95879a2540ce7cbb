"""The exact Kubernetes API calls the launchers make: the single source of the RBAC rules.

The chart's Role for the controller is checked against
``as_policy_rules(launcher_permissions())`` by the chart tests, so a launcher that starts
calling a new verb fails a test until the chart grants it, and the chart never grants more
than the launchers use. ``SPARK_DRIVER`` lists what a Spark driver needs for its executors
(the ServiceAccount of SparkApplication and Job drivers).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from txntable.api.common import Backend


@dataclass(frozen=True)
class Permission:
    """Verbs on one resource of one API group ("" is the core group)."""

    group: str
    resource: str
    verbs: tuple[str, ...]

    def __str__(self) -> str:
        where = f"{self.group}/{self.resource}" if self.group else self.resource
        return f"{where}: {','.join(self.verbs)}"


#: Creating a child with ``blockOwnerDeletion: true`` needs update on the owner's finalizers
#: (OwnerReferencesPermissionEnforcement admission plugin).
OWNER_FINALIZERS: Final = Permission("txntable.io", "txntables/finalizers", ("update",))

LAUNCHERS: Final[dict[Backend, tuple[Permission, ...]]] = {
    Backend.SPARK_APPLICATION: (
        Permission(
            "sparkoperator.k8s.io", "sparkapplications", ("create", "get", "list", "delete")
        ),
        # the driver pod's log holds the job's result line (name from status.driverInfo)
        Permission("", "pods/log", ("get",)),
        # a run in flight whose pods cannot start (image, scheduling) says so: its pods by label
        Permission("", "pods", ("list",)),
        OWNER_FINALIZERS,
    ),
    Backend.JOB: (
        Permission("batch", "jobs", ("create", "get", "list", "delete")),
        # find the Job's pod by its job-name label, then read its log; a run in flight whose
        # pods cannot start (image, scheduling) says so: its pods by label
        Permission("", "pods", ("list",)),
        Permission("", "pods/log", ("get",)),
        OWNER_FINALIZERS,
    ),
    Backend.LOCAL: (),
}

_SPARK_VERBS: Final = (
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
)
#: What Spark's driver does with its ServiceAccount: executor pods, their services,
#: config maps and volume claims.
SPARK_DRIVER: Final = tuple(
    Permission("", resource, _SPARK_VERBS)
    for resource in ("pods", "services", "configmaps", "persistentvolumeclaims")
)


def merged(perms: Iterable[Permission]) -> list[Permission]:
    """One entry per (group, resource), verbs united and sorted; stable order."""
    verbs: dict[tuple[str, str], set[str]] = {}
    for p in perms:
        verbs.setdefault((p.group, p.resource), set()).update(p.verbs)
    return [Permission(g, r, tuple(sorted(v))) for (g, r), v in sorted(verbs.items())]


def launcher_permissions(backends: Iterable[Backend] = tuple(Backend)) -> list[Permission]:
    """What the controller needs to launch runs on ``backends``."""
    return merged(p for b in backends for p in LAUNCHERS[b])


def as_policy_rules(perms: Iterable[Permission]) -> list[dict[str, list[str]]]:
    """``rbac.authorization.k8s.io/v1`` PolicyRules, one per resource."""
    return [
        {"apiGroups": [p.group], "resources": [p.resource], "verbs": list(p.verbs)} for p in perms
    ]
