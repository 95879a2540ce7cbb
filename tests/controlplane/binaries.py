"""The control plane's binaries: upstream kube-apiserver and etcd, built once per machine.

Why this exists: the control-plane tests run the real Kubernetes API server, and no container
engine or binary download is available, so the two mains are built from the Go module proxy by
the tools module in ``tools/controlplane`` (its go.mod pins ``k8s.io/kubernetes`` with one
``replace`` per staging module, and etcd at the version Kubernetes pins). ``tests.gobuild``
caches them in ``~/.cache/txntable/controlplane-<k8s>-etcd-<etcd>-<hash>/bin``.

``OLDEST`` is the same for the oldest Kubernetes release the chart claims (``tools/controlplane-
oldest``, Chart.yaml's ``kubeVersion``): the admission cases run on it too.

``python -m tests.controlplane.binaries`` (``make controlplane``) builds both when missing and
prints their ``bin`` directories; the tests only look (``find()``), they never build (a cold
build takes about a quarter of an hour each, past a test's timeout).
"""

from __future__ import annotations

from pathlib import Path

from tests.gobuild import TOOLS as _TOOLS
from tests.gobuild import GoTools, MissingBinariesError, kubernetes_ldflags

__all__ = ["APISERVER", "CONTROLPLANE", "ETCD", "MissingBinariesError", "find", "versions"]

TOOLS = _TOOLS / "controlplane"
KUBE_MODULE = "k8s.io/kubernetes"
ETCD_MODULE = "go.etcd.io/etcd/server/v3"
#: names of the two binaries in the cached bin directory
APISERVER, ETCD = "kube-apiserver", "etcd"


def _tools(module: str = "controlplane") -> GoTools:
    probe = GoTools(module=module, label="", binaries={})
    kube, etcd = probe.required(KUBE_MODULE), probe.required(ETCD_MODULE)
    return GoTools(
        module=module,
        label=f"controlplane-{kube}-etcd-{etcd}",
        binaries={APISERVER: f"{KUBE_MODULE}/cmd/kube-apiserver", ETCD: ETCD_MODULE},
        ldflags=kubernetes_ldflags(kube),
        make_target="controlplane",
    )


CONTROLPLANE = _tools()
#: the oldest Kubernetes the chart claims (Chart.yaml ``kubeVersion``), from its own tools
#: module (``tools/controlplane-oldest``): the CRDs, the chart and the admission cases run on it
#: too (``tests/controlplane/test_admission.py``)
OLDEST = _tools("controlplane-oldest")


def versions() -> tuple[str, str]:
    """(Kubernetes version, etcd version) the tools module pins, e.g. ("v1.37.2", "v3.7.0")."""
    return CONTROLPLANE.required(KUBE_MODULE), CONTROLPLANE.required(ETCD_MODULE)


def bin_dir() -> Path:
    """The cached bin directory for the pinned versions and this go.mod/go.sum."""
    return CONTROLPLANE.bin_dir()


def find() -> Path:
    """The bin directory holding both binaries; ``MissingBinariesError`` says how to build them."""
    return CONTROLPLANE.find()


def ensure() -> Path:
    """The bin directory, built first when missing (one builder at a time per machine)."""
    return CONTROLPLANE.ensure()


if __name__ == "__main__":
    print(ensure())
    print(OLDEST.ensure())
