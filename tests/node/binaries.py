"""The real node's programs, built once per machine from the pinned tools modules in ``tools/``.

Why this exists: a single-node Kubernetes cluster needs a kubelet, a container runtime, CNI
plugins, cluster DNS and the controllers that turn objects into pods, and none can be
downloaded here. Each set is one Go module (go.mod + go.sum, no Go code of ours), built by
``tests.gobuild`` into its own cache directory keyed by the versions and the module's hash:

* ``tools/node``: kubelet, kube-controller-manager, kube-scheduler, kube-proxy and kubectl from
  ``k8s.io/kubernetes`` (the API server's release; one ``replace`` per staging module);
* ``tools/containerd``: containerd 2.x, its runc shim and ``ctr`` (runc itself is Debian's);
* ``tools/cri-tools``: crictl, which stops and removes the node's pods through the CRI (so
  their networks are torn down by CNI) when the node stops;
* ``tools/cni``: the bridge, host-local, loopback and portmap CNI plugins;
* ``tools/coredns``: CoreDNS, the cluster DNS;
* ``tools/buildkit``: buildkitd and buildctl, the builder that reads our Dockerfile;
* ``tools/helm``: the helm command users install charts with;
* ``tools/spark-operator``: the Kubeflow Spark Operator (its go.mod's replaces copied).

The sandbox ("pause") program is upstream's ``build/pause/linux/pause.c`` from the same
``k8s.io/kubernetes`` module, compiled with the machine's C compiler (``pause_binary``).

``python -m tests.node.binaries`` (``make node``) builds what is missing and prints each bin
directory; the e2e fixtures only look.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.gobuild import GoTools, MissingBinariesError, cache_root, go, kubernetes_ldflags

KUBE_MODULE = "k8s.io/kubernetes"
CONTAINERD_MODULE = "github.com/containerd/containerd/v2"
CNI_MODULE = "github.com/containernetworking/plugins"
COREDNS_MODULE = "github.com/coredns/coredns"
BUILDKIT_MODULE = "github.com/moby/buildkit"
HELM_MODULE = "helm.sh/helm/v4"
SPARK_OPERATOR_MODULE = "github.com/kubeflow/spark-operator/v2"
CRI_TOOLS_MODULE = "sigs.k8s.io/cri-tools"
#: the pause program's version (upstream's build/pause/Makefile TAG)
PAUSE_VERSION = "3.10.1"


def _required(module_dir: str, module: str) -> str:
    return GoTools(module=module_dir, label="", binaries={}).required(module)


def _kubernetes() -> GoTools:
    kube = _required("node", KUBE_MODULE)
    return GoTools(
        module="node",
        label=f"node-{kube}",
        binaries={
            name: f"{KUBE_MODULE}/cmd/{name}"
            for name in ("kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy")
        }
        | {"kubectl": f"{KUBE_MODULE}/cmd/kubectl"},
        ldflags=kubernetes_ldflags(kube),
        make_target="node",
    )


def _containerd() -> GoTools:
    version = _required("containerd", CONTAINERD_MODULE)
    return GoTools(
        module="containerd",
        label=f"containerd-{version}",
        binaries={
            name: f"{CONTAINERD_MODULE}/cmd/{name}"
            for name in ("containerd", "containerd-shim-runc-v2", "ctr")
        },
        ldflags=(
            f"-X github.com/containerd/containerd/v2/version.Version={version}",
            f"-X github.com/containerd/containerd/v2/version.Package={CONTAINERD_MODULE}",
        ),
        # static: no btrfs snapshotter (cgo); overlayfs is the one the node uses
        tags=("no_btrfs",),
        make_target="node",
    )


def _cri_tools() -> GoTools:
    version = _required("cri-tools", CRI_TOOLS_MODULE)
    return GoTools(
        module="cri-tools",
        label=f"cri-tools-{version}",
        binaries={"crictl": f"{CRI_TOOLS_MODULE}/cmd/crictl"},
        ldflags=(f"-X sigs.k8s.io/cri-tools/pkg/version.Version={version}",),
        make_target="node",
    )


def _cni() -> GoTools:
    version = _required("cni", CNI_MODULE)
    plugins = {"bridge": "main", "loopback": "main", "host-local": "ipam", "portmap": "meta"}
    return GoTools(
        module="cni",
        label=f"cni-plugins-{version}",
        binaries={name: f"{CNI_MODULE}/plugins/{kind}/{name}" for name, kind in plugins.items()},
        ldflags=(f"-X {CNI_MODULE}/pkg/utils/buildversion.BuildVersion={version}",),
        make_target="node",
    )


def _coredns() -> GoTools:
    version = _required("coredns", COREDNS_MODULE)
    return GoTools(
        module="coredns",
        label=f"coredns-{version}",
        binaries={"coredns": COREDNS_MODULE},
        make_target="node",
    )


def _buildkit() -> GoTools:
    version = _required("buildkit", BUILDKIT_MODULE)
    return GoTools(
        module="buildkit",
        label=f"buildkit-{version}",
        binaries={name: f"{BUILDKIT_MODULE}/cmd/{name}" for name in ("buildkitd", "buildctl")},
        ldflags=(f"-X github.com/moby/buildkit/version.Version={version}",),
        make_target="node",
    )


def _helm() -> GoTools:
    version = _required("helm", HELM_MODULE)
    return GoTools(
        module="helm",
        label=f"helm-{version}",
        binaries={"helm": f"{HELM_MODULE}/cmd/helm"},
        ldflags=(f"-X helm.sh/helm/v4/internal/version.version={version}",),
        make_target="node",
    )


def _spark_operator() -> GoTools:
    version = _required("spark-operator", SPARK_OPERATOR_MODULE)
    return GoTools(
        module="spark-operator",
        label=f"spark-operator-{version}",
        binaries={"spark-operator": f"{SPARK_OPERATOR_MODULE}/cmd/operator"},
        ldflags=(f"-X github.com/kubeflow/spark-operator/v2.version={version}",),
        make_target="node",
    )


KUBERNETES = _kubernetes()
CONTAINERD = _containerd()
CRI_TOOLS = _cri_tools()
CNI = _cni()
COREDNS = _coredns()
BUILDKIT = _buildkit()
HELM = _helm()
SPARK_OPERATOR = _spark_operator()
NODE_TOOLS = (KUBERNETES, CONTAINERD, CRI_TOOLS, CNI, COREDNS, BUILDKIT, HELM, SPARK_OPERATOR)


def module_source(module: str, version: str) -> Path:
    """Where the Go module cache holds ``module@version`` (downloaded when missing)."""
    out = subprocess.run(
        [go(), "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        check=True,
        cwd=KUBERNETES.dir,
    ).stdout
    import json

    return Path(json.loads(out)["Dir"])


def pause_binary(ensure: bool = False) -> Path:
    """Upstream's pause program, compiled statically from the pinned Kubernetes module."""
    kube = KUBERNETES.required(KUBE_MODULE)
    target = cache_root() / f"pause-{PAUSE_VERSION}-{kube}" / "pause"
    if target.is_file() or not ensure:
        if not target.is_file():
            raise MissingBinariesError(f"pause is not built at {target}: run `make node`")
        return target
    source = module_source(KUBE_MODULE, kube) / "build" / "pause" / "linux" / "pause.c"
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    subprocess.run(
        ["gcc", "-Os", "-Wall", "-Werror", "-static", f'-DVERSION=v{PAUSE_VERSION}',
         "-o", str(partial), str(source)],
        check=True,
    )  # fmt: skip
    partial.rename(target)
    return target


def ensure_all() -> list[Path]:
    """Every node binary, built first where missing."""
    dirs = [tools.ensure() for tools in NODE_TOOLS]
    return [*dirs, pause_binary(ensure=True).parent]


if __name__ == "__main__":
    for path in ensure_all():
        print(path)
    sys.exit(0)
