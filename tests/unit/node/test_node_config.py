"""The real node's configuration documents say what docs/testing-real-node.md says they say.

The node itself runs only in the e2e tier (it needs root and the built binaries); these checks
keep its documents well-formed and the machine-specific choices in place on every test run.
"""

from __future__ import annotations

import ipaddress
import json
import tomllib
from pathlib import Path

from tests.node import config
from tests.node.config import NodePaths

PATHS = NodePaths(root=Path("/var/lib/x"), run=Path("/run/x"))


def test_containerd_uses_the_local_pause_cgroupfs_and_our_cni() -> None:
    doc = tomllib.loads(config.containerd_toml(PATHS, Path("/cni/bin"), "local/pause:1"))
    assert doc["version"] == 3
    assert doc["grpc"]["address"] == "/run/x/containerd/containerd.sock"
    plugins = doc["plugins"]
    assert plugins["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"] == "local/pause:1"
    runtime = plugins["io.containerd.cri.v1.runtime"]
    assert runtime["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is False
    assert runtime["cni"] == {"bin_dirs": ["/cni/bin"], "conf_dir": "/run/x/cni/net.d"}


def test_the_kubelet_runs_on_cgroup_v1_and_never_collects_images() -> None:
    doc = config.kubelet_config(PATHS, Path("/ca"), Path("/c"), Path("/k"), "192.0.2.2")
    assert doc["failCgroupV1"] is False and doc["cgroupDriver"] == "cgroupfs"
    assert doc["imageGCHighThresholdPercent"] == 100
    assert doc["authentication"]["anonymous"] == {"enabled": False}
    assert doc["authorization"] == {"mode": "Webhook"}
    assert doc["clusterDNS"] == [config.DNS_SERVICE_IP]
    assert doc["containerRuntimeEndpoint"] == "unix:///run/x/containerd/containerd.sock"


def test_addresses_fit_their_ranges() -> None:
    services = ipaddress.ip_network(config.SERVICE_CIDR)
    assert ipaddress.ip_address(config.DNS_SERVICE_IP) in services
    pods = ipaddress.ip_network(config.POD_CIDR)
    assert pods.subnet_of(ipaddress.ip_network(config.CLUSTER_CIDR))
    assert not pods.overlaps(services)
    conflist = config.cni_conflist(PATHS)
    bridge = conflist["plugins"][0]
    assert bridge["ipam"]["ranges"] == [[{"subnet": config.POD_CIDR}]]
    assert bridge["ipam"]["dataDir"].startswith("/run/x/")
    json.dumps(conflist)


def test_coredns_serves_the_address_the_kubelet_hands_out() -> None:
    objects = config.coredns_objects("local/coredns:1")
    service = next(o for o in objects if o["kind"] == "Service")
    assert service["spec"]["clusterIP"] == config.DNS_SERVICE_IP
    corefile = next(o for o in objects if o["kind"] == "ConfigMap")["data"]["Corefile"]
    assert f"kubernetes {config.CLUSTER_DOMAIN} " in corefile
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "local/coredns:1"
    assert container["imagePullPolicy"] == "Never"
