"""Least privilege, as the API server sees it: what the chart grants vs what the controller used.

``granted(install)`` reads the rules of every Role and ClusterRole the chart binds to the
controller's ServiceAccount (from the objects Helm installed). ``used(events, user)`` reads the
API server's audit log: each request the controller's user made, with the authorizer's decision.
Both are sets of ``Access(group, resource, verb, namespace)``: ``resource`` includes the
subresource (``txntables/status``), ``namespace`` is ``*`` for a ClusterRole's grant and for
cluster-scoped requests. ``table()`` lays them side by side for the docs and the report.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tests.controlplane.controller import Install

ANY = "*"


@dataclass(frozen=True, order=True)
class Access:
    group: str
    resource: str
    verb: str
    namespace: str = ANY

    def where(self) -> str:
        return f"{self.group or 'core'}/{self.resource}"


def granted(install: Install) -> set[Access]:
    """Every (group, resource, verb, namespace) a Role or ClusterRole bound to the controller's
    ServiceAccount grants (a ClusterRole bound by a ClusterRoleBinding: namespace ``*``)."""
    roles = {
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
        for o in install.objects
        if o["kind"] in ("Role", "ClusterRole")
    }
    out: set[Access] = set()
    for binding in install.objects:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(
            s.get("kind") == "ServiceAccount"
            and s.get("name") == install.service_account
            and s.get("namespace") == install.namespace
            for s in binding.get("subjects") or ()
        ):
            continue
        ref = binding["roleRef"]
        ns = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        role = roles[(ref["kind"], ns if ref["kind"] == "Role" else None, ref["name"])]
        for rule in role.get("rules") or ():
            for group in rule.get("apiGroups") or ():
                for resource in rule.get("resources") or ():
                    for verb in rule.get("verbs") or ():
                        out.add(Access(group, resource, verb, ns or ANY))
    return out


def used(events: Iterable[dict[str, Any]], user: str) -> tuple[set[Access], set[Access]]:
    """(allowed, forbidden) resource requests ``user`` made, from audit events."""
    allowed: set[Access] = set()
    forbidden: set[Access] = set()
    for event in events:
        if event.get("user", {}).get("username") != user or "objectRef" not in event:
            continue
        ref = event["objectRef"]
        resource = ref.get("resource", "")
        if ref.get("subresource"):
            resource = f"{resource}/{ref['subresource']}"
        access = Access(
            ref.get("apiGroup", ""), resource, event["verb"], ref.get("namespace") or ANY
        )
        decision = (event.get("annotations") or {}).get("authorization.k8s.io/decision")
        (forbidden if decision == "forbid" else allowed).add(access)
    return allowed, forbidden


def covers(grant: Access, access: Access) -> bool:
    """Whether ``grant`` authorizes ``access`` (a ``*`` namespace grant covers every one)."""
    return (grant.group, grant.resource, grant.verb) == (
        access.group,
        access.resource,
        access.verb,
    ) and grant.namespace in (ANY, access.namespace)


def unused(grants: set[Access], accesses: set[Access]) -> set[Access]:
    return {g for g in grants if not any(covers(g, a) for a in accesses)}


def ungranted(grants: set[Access], accesses: set[Access]) -> set[Access]:
    return {a for a in accesses if not any(covers(g, a) for g in grants)}


def table(
    grants: set[Access], accesses: set[Access], reasons: dict[tuple[str, str, str], str]
) -> str:
    """A Markdown table: each granted or used (resource, verb), and where it was used."""
    rows: dict[tuple[str, str, str], tuple[set[str], set[str]]] = {}
    for g in grants:
        rows.setdefault((g.group, g.resource, g.verb), (set(), set()))[0].add(g.namespace)
    for a in accesses:
        rows.setdefault((a.group, a.resource, a.verb), (set(), set()))[1].add(a.namespace)
    lines = [
        "| API group | resource | verb | granted in | used in | note |",
        "|---|---|---|---|---|---|",
    ]
    for (group, resource, verb), (where, seen) in sorted(rows.items()):
        note = reasons.get((group, resource, verb), "")
        granted_in = ", ".join(sorted(where)) or "NOT GRANTED"
        used_in = ", ".join(sorted(seen)) or "no"
        lines.append(
            f"| {group or 'core'} | {resource} | {verb} | {granted_in} | {used_in} | {note} |"
        )
    return "\n".join(lines)
