"""The e2e tier's object store: moto's S3 server in a pod, reached by the runs through a Service.

Why moto: it serves S3 with conditional writes (``If-None-Match: *`` answers 412 on an existing
key, as AWS does), which the engine's commits rely on, and it is what the rest of the suite
already tests against. MinIO's server would be the usual choice, but it is AGPL.

The pod runs the ``txntable.local/moto`` image (``tests/node/images/moto.Dockerfile``) as a
non-root user in a namespace that enforces the restricted Pod Security level. Pods reach it at
``http://s3.<namespace>.svc.cluster.local:5000``; the tests on the host reach the same Service
through its cluster IP (kube-proxy's rules apply to the host's own traffic too). Credentials
live in a Secret the TxnTables name by ``secretRef``, never in their spec.
"""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass
from typing import Any

from tests.e2e.support import Kube, wait_until
from tests.node.images import MOTO_IMAGE

ACCESS_KEY, SECRET_KEY = "e2e-access-key", "e2e-secret-key"
REGION = "us-east-1"
PORT = 5000


@dataclass(frozen=True)
class Store:
    namespace: str
    cluster_ip: str

    @property
    def in_cluster(self) -> str:
        return f"http://s3.{self.namespace}.svc.cluster.local:{PORT}"

    @property
    def from_host(self) -> str:
        return f"http://{self.cluster_ip}:{PORT}"

    def options(self, endpoint: str | None = None) -> dict[str, str]:
        """Storage options with credentials, for the tests' own readers and writers."""
        return {
            "AWS_ENDPOINT_URL": endpoint or self.from_host,
            "AWS_ALLOW_HTTP": "true",
            "AWS_REGION": REGION,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        }

    def table_options(self) -> dict[str, str]:
        """What a TxnTable's ``spec.storage.options`` says (no credentials: those are the
        Secret's)."""
        return {"AWS_ENDPOINT_URL": self.in_cluster, "AWS_ALLOW_HTTP": "true",
                "AWS_REGION": REGION}  # fmt: skip

    def secret(self, namespace: str, name: str = "lake-credentials") -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "type": "Opaque",
            "stringData": {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY},
        }

    def create_bucket(self, bucket: str) -> None:
        import boto3

        s3 = boto3.client(
            "s3",
            endpoint_url=self.from_host,
            region_name=REGION,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
        )
        s3.create_bucket(Bucket=bucket)

    def keys(self, bucket: str, prefix: str) -> list[str]:
        import boto3

        s3 = boto3.client(
            "s3",
            endpoint_url=self.from_host,
            region_name=REGION,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
        )
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", ()))


def deploy(kube: Kube, namespace: str) -> Store:
    """moto's server as a Deployment and Service ``s3`` in ``namespace``; returns once it
    answers from the host."""
    import moto

    labels = {"app.kubernetes.io/name": "moto-s3"}
    kube.namespace(namespace)
    kube.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "s3", "namespace": namespace, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "securityContext": {
                            "runAsNonRoot": True,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [
                            {
                                "name": "moto",
                                "image": MOTO_IMAGE.format(version=moto.__version__),
                                "imagePullPolicy": "Never",
                                "ports": [{"name": "s3", "containerPort": PORT}],
                                "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}},
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]},
                                    "readOnlyRootFilesystem": True,
                                },
                                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                                "readinessProbe": {"httpGet": {"path": "/moto-api/", "port": PORT}},
                            }
                        ],
                        "volumes": [{"name": "tmp", "emptyDir": {}}],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "s3", "namespace": namespace, "labels": labels},
            "spec": {"selector": labels, "ports": [{"name": "s3", "port": PORT}]},
        },
    )
    kube.kubectl("-n", namespace, "rollout", "status", "deployment/s3", "--timeout=180s")
    cluster_ip = str(kube.get("-n", namespace, "service", "s3")["spec"]["clusterIP"])
    store = Store(namespace=namespace, cluster_ip=cluster_ip)

    def answers() -> bool:
        with urllib.request.urlopen(f"{store.from_host}/moto-api/", timeout=5) as resp:
            return bool(resp.status == 200)

    wait_until("moto's Service answering from the host", answers, 60)
    return store
