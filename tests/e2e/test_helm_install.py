"""The chart's RBAC as the real API server's authorizer sees it, for the ServiceAccount the
controller pod really runs as (``kubectl auth can-i --as``): what it needs, and no more.

The chart's rules are checked offline against operator/txntable/handlers/permissions.py
(tests/unit/deploy) and against every request the controller made in the control-plane tests
(tests/controlplane/test_rbac.py); this asks the cluster the chart is installed in.
"""

from __future__ import annotations

import pytest

from tests.e2e.lake import Install
from tests.e2e.support import Kube

pytestmark = pytest.mark.e2e


def can(kube: Kube, inst: Install, verb: str, resource: str, namespace: str) -> bool:
    # this release's live controller pod: a pod of the install guide's release (run first,
    # tests/e2e/test_install_doc.py) may still be terminating in the same namespace
    selector = f"app.kubernetes.io/component=controller,app.kubernetes.io/instance={inst.release}"
    pods = kube.get("-n", inst.namespace, "pods", "-l", selector)
    (pod,) = [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")]
    account = pod["spec"]["serviceAccountName"]
    user = f"system:serviceaccount:{inst.namespace}:{account}"
    out = kube.kubectl("auth", "can-i", verb, resource, "-n", namespace, "--as", user, check=False)
    return out.stdout.strip() == "yes"


def test_rbac_as_the_api_server_sees_it(kube: Kube, operator: Install) -> None:
    tables = operator.tables
    assert can(kube, operator, "create", "jobs.batch", tables)
    assert can(kube, operator, "patch", "txntables.txntable.io/status", tables)
    assert can(kube, operator, "get", "secrets", tables)
    assert can(kube, operator, "list", "pods", tables)
    assert not can(kube, operator, "list", "secrets", tables)
    assert not can(kube, operator, "get", "secrets", "kube-system")
    assert not can(kube, operator, "create", "jobs.batch", "kube-system")
    assert not can(kube, operator, "delete", "txntables.txntable.io", tables)
    assert not can(kube, operator, "create", "pods", tables)
