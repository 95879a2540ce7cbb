"""The real node does what a cluster's node does: pods get addresses, DNS and their tokens; the
Job, TTL and garbage-collection controllers finish and remove what they own; namespaces go.

These are the node's own acceptance checks (issue 29's "done means"), before any of ours: a
failure here is the cluster's, not the operator's.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.e2e.pods import finished, python_pod
from tests.e2e.support import Kube, wait_until
from tests.node.node import NODE_NAME

pytestmark = pytest.mark.e2e

#: resolve the API server's Service name and ask who we are with the mounted token
WHOAMI = textwrap.dedent(
    """
    import json, socket, ssl, urllib.request
    sa = "/var/run/secrets/kubernetes.io/serviceaccount"
    address = socket.getaddrinfo("kubernetes.default.svc", 443)[0][4][0]
    token = open(f"{sa}/token").read()
    req = urllib.request.Request(
        "https://kubernetes.default.svc/apis/authentication.k8s.io/v1/selfsubjectreviews",
        data=json.dumps({"apiVersion": "authentication.k8s.io/v1",
                         "kind": "SelfSubjectReview"}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    ctx = ssl.create_default_context(cafile=f"{sa}/ca.crt")
    body = json.load(urllib.request.urlopen(req, context=ctx, timeout=10))
    print(json.dumps({"address": address, "user": body["status"]["userInfo"]["username"]}))
    """
)


def test_the_node_is_ready_with_the_pinned_kubelet(kube: Kube) -> None:
    node = kube.get("node", NODE_NAME)
    ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert ready["Ready"] == "True", node["status"]["conditions"]
    info = node["status"]["nodeInfo"]
    assert info["kubeletVersion"] == "v1.37.2"
    assert info["containerRuntimeVersion"].startswith("containerd://2.")


def test_a_pod_resolves_the_api_server_and_reaches_it_with_its_token(kube: Kube) -> None:
    ns = kube.namespace("e2e-node-dns")
    kube.apply(python_pod("whoami", ns, WHOAMI))
    phase = wait_until("pod whoami to finish", lambda: finished(kube, ns, "whoami"), 180)
    log = kube.kubectl("-n", ns, "logs", "whoami").stdout
    assert phase == "Succeeded", log
    seen = json.loads(log.strip().splitlines()[-1])
    assert seen == {"address": "10.0.0.1", "user": f"system:serviceaccount:{ns}:default"}


def test_a_job_completes_and_its_pod_goes_after_the_ttl(kube: Kube) -> None:
    ns = kube.namespace("e2e-node-job")
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "hello", "namespace": ns},
        "spec": {
            "ttlSecondsAfterFinished": 5,
            "backoffLimit": 0,
            "template": {"spec": python_pod("x", ns, "print('hello from a Job')")["spec"]},
        },
    }
    kube.apply(job)

    def complete() -> bool:
        conditions = kube.get("-n", ns, "job", "hello").get("status", {}).get("conditions", [])
        return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)

    wait_until("Job hello Complete", complete, 180)
    pods = kube.get("-n", ns, "pods", "-l", "job-name=hello")["items"]
    assert [p["status"]["phase"] for p in pods] == ["Succeeded"]
    # the TTL controller deletes the Job; the garbage collector deletes its pod
    wait_until(
        "Job hello and its pod gone",
        lambda: not kube.get("-n", ns, "jobs,pods")["items"],
        120,
    )


def test_a_namespace_finishes_deleting(kube: Kube) -> None:
    ns = kube.namespace("e2e-node-gone")
    kube.apply(python_pod("sleeper", ns, "import time; time.sleep(3600)"))
    wait_until(
        "pod sleeper Running",
        lambda: kube.get("-n", ns, "pod", "sleeper")["status"].get("phase") == "Running",
        120,
    )
    kube.kubectl("delete", "namespace", ns, "--wait=false")
    wait_until(
        f"namespace {ns} gone",
        lambda: kube.kubectl("get", "namespace", ns, check=False).returncode != 0,
        180,
    )
