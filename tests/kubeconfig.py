"""Writing a kubeconfig: how every test and benchmark points a controller at an API server.

The controller finds its API server the way it does in a cluster without in-cluster
credentials: ``KUBECONFIG`` (server, CA, bearer token). Tests and benchmarks write one for
kmock's emulator (plain HTTP, any token) or for the real test control plane (TLS with its CA,
a ServiceAccount token), so the production client path is the only one there is.
"""

from __future__ import annotations

from pathlib import Path

import yaml


def write_kubeconfig(
    path: Path,
    server: str,
    token: str,
    *,
    ca_file: Path | None = None,
    namespace: str = "default",
) -> Path:
    """Write a one-context kubeconfig for ``server`` with bearer ``token``; returns ``path``."""
    cluster: dict[str, str] = {"server": server}
    if ca_file is not None:
        cluster["certificate-authority"] = str(ca_file)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test", "cluster": cluster}],
        "users": [{"name": "test", "user": {"token": token}}],
        "contexts": [
            {"name": "test", "context": {"cluster": "test", "user": "test", "namespace": namespace}}
        ],
        "current-context": "test",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path
