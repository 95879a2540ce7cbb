"""Pure builders of the real node's configuration: containerd, CNI, kubelet, kube-proxy, CoreDNS.

Why this exists: the node's processes (``tests.node.node``) are configured the way kubeadm and
kind configure a node, and keeping the documents here, apart from the processes, lets each be
read (and unit-tested) as what an administrator would write. The choices this machine forces:

* no CAP_SYS_RESOURCE, even for root: containerd clamps OOM score adjustments
  (``restrict_oom_score_adj``), as for rootless nodes;
* cgroup v1 (a hybrid layout; no controllers on the unified hierarchy): the kubelet needs
  ``failCgroupV1: false`` since 1.35, and both it and containerd use the ``cgroupfs`` driver
  (no systemd here);
* no registry: every image is imported into containerd beforehand, the sandbox image is the
  locally built pause, and the kubelet never garbage-collects images (it would delete an
  imported image that no registry can give back);
* one node: the pod network is one bridge (``cni0``) with host-local addresses, masquerading
  traffic that leaves it; kube-proxy programs Services with nftables.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

POD_CIDR = "10.244.0.0/24"
CLUSTER_CIDR = "10.244.0.0/16"
SERVICE_CIDR = "10.0.0.0/24"
DNS_SERVICE_IP = "10.0.0.10"
CLUSTER_DOMAIN = "cluster.local"
BRIDGE = "cni0"
KUBELET_PORT = 10250


@dataclass(frozen=True)
class NodePaths:
    """Where the node keeps its state: ``root`` persists (containerd's images), ``run`` does
    not (sockets, the kubelet's pods, CNI state)."""

    root: Path
    run: Path

    @property
    def containerd_root(self) -> Path:
        return self.root / "containerd"

    @property
    def containerd_state(self) -> Path:
        return self.run / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.run / "containerd" / "containerd.sock"

    @property
    def cni_conf(self) -> Path:
        return self.run / "cni" / "net.d"

    @property
    def kubelet_root(self) -> Path:
        return self.run / "kubelet"

    @property
    def pod_logs(self) -> Path:
        return self.run / "pod-logs"


def containerd_toml(
    paths: NodePaths, cni_bin: Path, sandbox_image: str, runc: Path = Path("/usr/sbin/runc")
) -> str:
    """containerd 2.x (config version 3) with the CRI plugin for the kubelet; ``runc`` is the
    OCI runtime binary its runc shim runs."""
    return f"""version = 3
root = "{paths.containerd_root}"
state = "{paths.containerd_state}"

[grpc]
  address = "{paths.containerd_socket}"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "{sandbox_image}"

[plugins.'io.containerd.cri.v1.runtime']
  # this machine withholds CAP_SYS_RESOURCE even from root: no process may lower its OOM
  # score, so the kubelet's -998 for sandboxes (and -997 for Guaranteed pods) is clamped to
  # containerd's own score instead of failing every pod ("failed to update
  # /proc/self/oom_score_adj: Permission denied" from runc)
  restrict_oom_score_adj = true
  # this kernel mounts no hugetlb hierarchy
  tolerate_missing_hugetlb_controller = true
  disable_hugetlb_controller = true

[plugins.'io.containerd.cri.v1.runtime'.containerd]
  default_runtime_name = "runc"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = "{runc}"
  SystemdCgroup = false

[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ["{cni_bin}"]
  conf_dir = "{paths.cni_conf}"

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
"""


def cni_conflist(paths: NodePaths) -> dict[str, Any]:
    """One bridge for every pod, host-local addresses (kept under the node's run directory,
    so a stopped node leaves no address reserved), traffic leaving it masqueraded."""
    return {
        "cniVersion": "1.0.0",
        "name": "txntable-pods",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": True,
                # a pod reaching itself through a Service (e.g. CoreDNS asking itself)
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(paths.run / "cni" / "networks"),
                    "ranges": [[{"subnet": POD_CIDR}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def kubelet_config(
    paths: NodePaths, ca_file: Path, cert: Path, key: Path, node_ip: str
) -> dict[str, Any]:
    """The kubelet's KubeletConfiguration."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # this machine's cgroups are v1 (hybrid); the kubelet refuses them since 1.35 unless told
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{paths.containerd_socket}",
        "address": node_ip,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "tlsCertFile": str(cert),
        "tlsPrivateKeyFile": str(key),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca_file)},
        },
        "authorization": {"mode": "Webhook"},
        "clusterDNS": [DNS_SERVICE_IP],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": "/etc/resolv.conf",
        "podLogsDir": str(paths.pod_logs),
        "failSwapOn": False,
        # images come only from imports: never collect them
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "200Mi",
            "nodefs.available": "3%",
            "imagefs.available": "3%",
            "nodefs.inodesFree": "3%",
        },
        "serializeImagePulls": False,
        "shutdownGracePeriod": "0s",
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "syncFrequency": "10s",
        "fileCheckFrequency": "10s",
        "nodeStatusReportFrequency": "10s",
        "containerLogMaxSize": "10Mi",
    }


def kube_proxy_config(kubeconfig: Path, node_name: str) -> dict[str, Any]:
    """kube-proxy with nftables (the kernel has nf_tables; iptables' xtables are not needed)."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "nftables",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "clusterCIDR": CLUSTER_CIDR,
        "hostnameOverride": node_name,
        "bindAddress": "0.0.0.0",
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        # leave the machine's conntrack table size alone
        "conntrack": {"maxPerCore": 0, "min": 0},
    }


def coredns_objects(image: str) -> list[dict[str, Any]]:
    """CoreDNS in kube-system as kubeadm deploys it: its account and RBAC, the Corefile, one
    replica, and the ``kube-dns`` Service at the address the kubelet gives pods."""
    labels = {"k8s-app": "kube-dns"}
    corefile = f""".:53 {{
    errors
    health {{
        lameduck 5s
    }}
    ready
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }}
    forward . /etc/resolv.conf
    cache 30
    loop
    reload
}}
"""
    meta = {"namespace": "kube-system"}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {**meta, "name": "coredns"}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "system:coredns"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["endpoints", "services", "pods", "namespaces"],
                    "verbs": ["list", "watch"],
                },
                {
                    "apiGroups": ["discovery.k8s.io"],
                    "resources": ["endpointslices"],
                    "verbs": ["list", "watch"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "system:coredns"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:coredns",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "coredns", "namespace": "kube-system"}],
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {**meta, "name": "coredns"},
            "data": {"Corefile": corefile},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {**meta, "name": "coredns", "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": "coredns",
                        "priorityClassName": "system-cluster-critical",
                        "dnsPolicy": "Default",
                        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                        "containers": [
                            {
                                "name": "coredns",
                                "image": image,
                                "imagePullPolicy": "Never",
                                "args": ["-conf", "/etc/coredns/Corefile"],
                                "ports": [
                                    {"name": "dns", "containerPort": 53, "protocol": "UDP"},
                                    {"name": "dns-tcp", "containerPort": 53, "protocol": "TCP"},
                                ],
                                "resources": {
                                    "requests": {"cpu": "50m", "memory": "70Mi"},
                                    "limits": {"memory": "170Mi"},
                                },
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                    "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]},
                                },
                                "volumeMounts": [
                                    {
                                        "name": "config",
                                        "mountPath": "/etc/coredns",
                                        "readOnly": True,
                                    }
                                ],
                                "livenessProbe": {
                                    "httpGet": {"path": "/health", "port": 8080},
                                    "initialDelaySeconds": 10,
                                },
                                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181}},
                            }
                        ],
                        "volumes": [{"name": "config", "configMap": {"name": "coredns"}}],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {**meta, "name": "kube-dns", "labels": labels},
            "spec": {
                "clusterIP": DNS_SERVICE_IP,
                "selector": labels,
                "ports": [
                    {"name": "dns", "port": 53, "protocol": "UDP"},
                    {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
                ],
            },
        },
    ]


def dumps(document: dict[str, Any]) -> str:
    """JSON, which every Kubernetes component reads as YAML."""
    return json.dumps(document, indent=2)
