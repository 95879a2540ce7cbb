"""A real Kubernetes node on this machine: containerd, kubelet, kube-proxy, scheduler, controllers.

Why this exists: the operator launches Spark runs as pods, and only a real node shows what the
API server alone cannot: scheduling, image handling, pod IPs and DNS, Spark's executors meeting
their driver, OOMKilled, TTL cleanup, garbage collection. The node joins the control plane of
``tests.controlplane.plane`` (started with ``NodeAccess``), as kubeadm's single-node clusters
do, with upstream binaries built by ``tests.node.binaries`` and images imported from
``tests.node.images``:

* containerd 2.x with runc (Debian's) and the CNI plugins; the sandbox image is our pause;
* the kubelet (cgroup v1, cgroupfs), authenticated by a token as ``system:node:<name>`` and
  authorized by the Node authorizer; it serves a certificate of the plane's CA and accepts the
  API server's client certificate (``system:kubelet-api-admin``, as kubeadm binds it);
* kube-controller-manager (the Job, TTL, garbage-collector, namespace, ServiceAccount and
  every other default controller), kube-scheduler and kube-proxy (nftables), each under its own
  identity from the default RBAC;
* CoreDNS in kube-system behind ``kube-dns`` (10.0.0.10).

``Node.start`` returns when the Node is Ready and CoreDNS answers; ``Node.stop`` removes every
pod through the CRI (so CNI releases its addresses), stops every process it started, removes
the kube-proxy rules, the bridge and the kubelet's mounts. It needs root; the machine's
requirements are in docs/testing-real-node.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from tests.controlplane.kube import apply, wait_for
from tests.controlplane.pki import KUBELET_CLIENT_USER
from tests.controlplane.plane import ControlPlane, NodeAccess, free_port, stop_process, tail
from tests.node import binaries, config
from tests.node.config import NodePaths

#: where containerd keeps its images between runs (persistent) and where everything else of a
#: running node lives (removed at stop)
DEFAULT_PATHS = NodePaths(root=Path("/var/lib/txntable-node"), run=Path("/run/txntable-node"))
NODE_NAME = "txntable-node"
#: seconds for the Node to be Ready and CoreDNS to answer
READY_TIMEOUT = 180.0


def node_ip() -> str:
    """The address of the interface holding the default route (pods reach the API server at
    it through the ``kubernetes`` Service); fails when there is none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.254", 9))  # no packet is sent: this only picks a route
        except OSError as exc:
            raise RuntimeError(
                "the real node needs a non-loopback address with a route (none found)"
            ) from exc
        address = str(s.getsockname()[0])
    if address.startswith("127."):
        raise RuntimeError("the real node needs a non-loopback address (only loopback found)")
    return address


@dataclass(frozen=True)
class NodeIdentity:
    """The node's name, address and the tokens of its components."""

    name: str
    ip: str
    kubelet_token: str = field(default_factory=lambda: secrets.token_hex(16))
    controller_manager_token: str = field(default_factory=lambda: secrets.token_hex(16))
    scheduler_token: str = field(default_factory=lambda: secrets.token_hex(16))
    proxy_token: str = field(default_factory=lambda: secrets.token_hex(16))

    @classmethod
    def here(cls, name: str = NODE_NAME) -> NodeIdentity:
        return cls(name=name, ip=node_ip())

    def access(self) -> NodeAccess:
        """What the control plane must know before the node joins it."""
        return NodeAccess(
            ip=self.ip,
            service_cidr=config.SERVICE_CIDR,
            tokens=(
                (self.kubelet_token, f"system:node:{self.name}", ("system:nodes",)),
                (self.controller_manager_token, "system:kube-controller-manager", ()),
                (self.scheduler_token, "system:kube-scheduler", ()),
                (self.proxy_token, "system:kube-proxy", ()),
            ),
        )


def _sysctl(key: str, value: str) -> None:
    Path("/proc/sys", *key.split(".")).write_text(value)


def _unmount_below(path: Path) -> None:
    """Unmount everything mounted at or below ``path`` (deepest first)."""
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == str(path) or point.startswith(f"{path}/"):
            mounts.append(point)
    for point in sorted(mounts, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)


@dataclass
class Node:
    """A running node. See the module docstring."""

    plane: ControlPlane
    identity: NodeIdentity
    paths: NodePaths
    logdir: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    # -- start -----------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        plane: ControlPlane,
        identity: NodeIdentity,
        images: list[Path],
        logdir: Path,
        paths: NodePaths = DEFAULT_PATHS,
    ) -> Node:
        if os.geteuid() != 0:
            raise RuntimeError("the real node needs root (containers, mounts, networking)")
        node = cls(plane=plane, identity=identity, paths=paths, logdir=logdir)
        logdir.mkdir(parents=True, exist_ok=True)
        cleanup_leftovers(paths)
        try:
            node._prepare_host()
            node._start_containerd()
            node.import_images(images)
            node._grant_api_server()
            node._start_controllers()
            node._start_kubelet()
            node._start_proxy()
            node._wait_ready()
            node._start_dns()
        except BaseException:
            node.stop()
            raise
        return node

    @property
    def workdir(self) -> Path:
        return self.paths.run / "etc"

    def _prepare_host(self) -> None:
        _sysctl("net.ipv4.ip_forward", "1")
        # bridged pod traffic passes the nftables rules (Services between pods of the bridge)
        _sysctl("net.bridge.bridge-nf-call-iptables", "1")
        for directory in (self.workdir, self.paths.cni_conf, self.paths.kubelet_root,
                          self.paths.pod_logs, self.paths.containerd_root):  # fmt: skip
            directory.mkdir(parents=True, exist_ok=True)
        (self.paths.cni_conf / "10-txntable.conflist").write_text(
            config.dumps(config.cni_conflist(self.paths))
        )

    def _kubeconfig(self, name: str, token: str) -> Path:
        return self.plane.kubeconfig(self.workdir / f"{name}.kubeconfig", token=token)

    def _spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        log = self.logdir / f"{name}.log"
        with log.open("ab") as out:
            out.write(f"\n=== {' '.join(args)}\n".encode())
            out.flush()
            self.procs[name] = subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def _alive(self, name: str) -> None:
        proc = self.procs[name]
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited ({proc.returncode}):\n{self.log(name)}")

    def log(self, name: str, lines: int = 40) -> str:
        return tail(self.logdir / f"{name}.log", lines)

    # containerd and images

    def _path_env(self) -> dict[str, str]:
        """PATH with the containerd shim and Debian's runc (``/usr/sbin``) first."""
        bins = f"{binaries.CONTAINERD.find()}:/usr/sbin:/usr/bin:/sbin:/bin"
        return dict(os.environ, PATH=bins)

    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        ctr = binaries.CONTAINERD.find() / "ctr"
        return subprocess.run(
            [str(ctr), "--address", str(self.paths.containerd_socket), "-n", "k8s.io", *args],
            capture_output=True,
            text=True,
            check=check,
            timeout=600,
        )

    def crictl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        crictl = binaries.CRI_TOOLS.find() / "crictl"
        endpoint = f"unix://{self.paths.containerd_socket}"
        return subprocess.run(
            [str(crictl), "--runtime-endpoint", endpoint, "--image-endpoint", endpoint,
             "--timeout", "60s", *args],
            capture_output=True, text=True, check=check, timeout=300,
        )  # fmt: skip

    def _start_containerd(self) -> None:
        cni_bin = binaries.CNI.find()
        conf = self.workdir / "containerd.toml"
        runc = Path(os.environ.get("TXNTABLE_NODE_RUNC", "/usr/sbin/runc"))
        conf.write_text(config.containerd_toml(self.paths, cni_bin, images_pause(), runc))
        bin_dir = binaries.CONTAINERD.find()
        self._spawn("containerd", [str(bin_dir / "containerd"), "--config", str(conf)],
                    env=self._path_env())  # fmt: skip

        def answers() -> bool:
            self._alive("containerd")
            return self.ctr("version", check=False).returncode == 0

        wait_for("containerd to answer", answers, timeout=60)

    def import_images(self, archives: list[Path]) -> None:
        """Import OCI archives whose image containerd does not hold at the same digest."""
        held = {}
        for line in self.ctr("images", "ls").stdout.splitlines()[1:]:
            words = line.split()
            if len(words) >= 3:
                held[words[0]] = words[2]
        for archive in archives:
            name, digest = archive_image(archive)
            if held.get(name) == digest:
                continue
            self.ctr("images", "import", "--no-unpack=false", str(archive))

    # control plane parts

    def _grant_api_server(self) -> None:
        """The API server calls kubelets (logs, exec) as its client certificate's user."""
        apply(
            self.plane.client(),
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "txntable-node:apiserver-kubelet-client"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": "system:kubelet-api-admin"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                              "name": KUBELET_CLIENT_USER}],
            },
        )  # fmt: skip

    def _start_controllers(self) -> None:
        k8s = binaries.KUBERNETES.find()
        pki = self.plane.pki
        kcm = self._kubeconfig("controller-manager", self.identity.controller_manager_token)
        self._spawn("kube-controller-manager", [
            str(k8s / "kube-controller-manager"),
            f"--kubeconfig={kcm}",
            f"--authentication-kubeconfig={kcm}",
            f"--authorization-kubeconfig={kcm}",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            "--leader-elect=false",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki['sa_key']}",
            f"--root-ca-file={pki['ca']}",
            f"--service-cluster-ip-range={config.SERVICE_CIDR}",
            f"--cluster-cidr={config.CLUSTER_CIDR}",
            "--allocate-node-cidrs=false",
            "--controllers=*",
            # a finished pod is collected quickly (the e2e tier waits for TTL cleanup)
            "--concurrent-ttl-after-finished-syncs=5",
        ])  # fmt: skip
        sched = self._kubeconfig("scheduler", self.identity.scheduler_token)
        self._spawn("kube-scheduler", [
            str(k8s / "kube-scheduler"),
            f"--kubeconfig={sched}",
            f"--authentication-kubeconfig={sched}",
            f"--authorization-kubeconfig={sched}",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            "--leader-elect=false",
        ])  # fmt: skip

    def _start_kubelet(self) -> None:
        pki = self.plane.pki
        conf = self.workdir / "kubelet.yaml"
        conf.write_text(
            config.dumps(
                config.kubelet_config(
                    self.paths, pki["ca"], pki["kubelet_cert"], pki["kubelet_key"], self.identity.ip
                )
            )
        )
        kubeconfig = self._kubeconfig("kubelet", self.identity.kubelet_token)
        self._spawn("kubelet", [
            str(binaries.KUBERNETES.find() / "kubelet"),
            f"--config={conf}",
            f"--kubeconfig={kubeconfig}",
            f"--root-dir={self.paths.kubelet_root}",
            f"--hostname-override={self.identity.name}",
            f"--node-ip={self.identity.ip}",
        ], env=self._path_env())  # fmt: skip

    def restart_kubelet(self) -> None:
        """Stop the kubelet (SIGTERM) and start it again, as a node's kubelet restarts on an
        upgrade or a crash: the pods keep running in containerd meanwhile."""
        proc = self.procs.pop("kubelet", None)
        if proc is not None:
            stop_process(proc)
        self._start_kubelet()
        self._wait_ready()

    def _start_proxy(self) -> None:
        kubeconfig = self._kubeconfig("kube-proxy", self.identity.proxy_token)
        conf = self.workdir / "kube-proxy.yaml"
        conf.write_text(config.dumps(config.kube_proxy_config(kubeconfig, self.identity.name)))
        self._spawn("kube-proxy",
                    [str(binaries.KUBERNETES.find() / "kube-proxy"), f"--config={conf}"],
                    env=self._path_env())  # fmt: skip

    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.plane.client())

    def _wait_ready(self) -> None:
        core = self.core()

        def ready() -> bool:
            for name in ("containerd", "kubelet", "kube-proxy", "kube-controller-manager",
                         "kube-scheduler"):  # fmt: skip
                self._alive(name)
            try:
                node = core.read_node(self.identity.name)
            except client.ApiException:
                return False
            return any(
                c.type == "Ready" and c.status == "True" for c in node.status.conditions or ()
            )

        wait_for(f"Node {self.identity.name} Ready", ready, timeout=READY_TIMEOUT, every=1.0)

    def _start_dns(self) -> None:
        api = self.plane.client()
        for obj in config.coredns_objects(images_coredns()):
            apply(api, obj)
        core = self.core()

        def answering() -> bool:
            self._alive("kubelet")
            pods = core.list_namespaced_pod("kube-system", label_selector="k8s-app=kube-dns")
            return any(
                any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or ())
                for p in pods.items
            )

        wait_for("CoreDNS Ready", answering, timeout=READY_TIMEOUT, every=1.0)

    # -- stop ------------------------------------------------------------------------------

    def stop(self) -> None:
        """Remove every pod, stop every process, undo the host changes (see module doc)."""
        kubelet = self.procs.pop("kubelet", None)
        if kubelet is not None:
            stop_process(kubelet)
        if self.paths.containerd_socket.exists():
            with contextlib.suppress(Exception):
                self.crictl("rmp", "--all", "--force", check=False)
        for name in ("kube-proxy", "kube-scheduler", "kube-controller-manager", "containerd"):
            proc = self.procs.pop(name, None)
            if proc is not None:
                stop_process(proc)
        cleanup_leftovers(self.paths)


def _manifest_digest(layout_index: dict[str, Any]) -> tuple[str, str]:
    manifest = layout_index["manifests"][0]
    name = manifest.get("annotations", {}).get("io.containerd.image.name", "")
    return str(name), str(manifest["digest"])


def archive_image(archive: Path) -> tuple[str, str]:
    """(image name, manifest digest) of an OCI archive written by BuildKit."""
    out = subprocess.run(
        ["tar", "-xOf", str(archive), "index.json"], capture_output=True, check=True
    ).stdout
    return _manifest_digest(json.loads(out))


def images_pause() -> str:
    from tests.node.images import PAUSE_IMAGE

    return PAUSE_IMAGE


def images_coredns() -> str:
    from tests.node.images import COREDNS_IMAGE

    return COREDNS_IMAGE.format(version=binaries.COREDNS.required(binaries.COREDNS_MODULE))


def _kill_pods() -> None:
    """SIGKILL every process left in the kubelet's pod cgroups and remove those cgroups."""
    for controller in sorted(Path("/sys/fs/cgroup").iterdir()):
        pods = controller / "kubepods"
        if not pods.is_dir():
            continue
        for procs in pods.rglob("cgroup.procs"):
            with contextlib.suppress(OSError):
                for pid in procs.read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), 9)
    time.sleep(0.3)
    for controller in sorted(Path("/sys/fs/cgroup").iterdir()):
        pods = controller / "kubepods"
        if pods.is_dir():
            for directory in sorted(pods.rglob("*"), key=lambda p: len(p.parts), reverse=True):
                if directory.is_dir():
                    with contextlib.suppress(OSError):
                        directory.rmdir()
            with contextlib.suppress(OSError):
                pods.rmdir()


def cleanup_leftovers(paths: NodePaths) -> None:
    """Undo what a node left behind, including one whose test process was killed: its
    processes (found by the paths in their command lines), pods' shims and mounts, kube-proxy's
    nftables tables, the pod bridge, and the run directory. Containerd's images stay."""
    marker = str(paths.run)
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit() or int(pid_dir.name) == os.getpid():
            continue
        try:
            cmdline = (pid_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmdline or f"{paths.containerd_state}" in cmdline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(pid_dir.name), 9)
    _kill_pods()
    time.sleep(0.2)
    for netns in Path("/var/run/netns").glob("cni-*"):
        subprocess.run(["umount", "-l", str(netns)], capture_output=True, check=False)
        netns.unlink(missing_ok=True)
    for family in ("ip", "ip6"):
        subprocess.run(["nft", "delete", "table", family, "kube-proxy"],
                       capture_output=True, check=False)  # fmt: skip
    subprocess.run(["ip", "link", "delete", config.BRIDGE], capture_output=True, check=False)
    _unmount_below(paths.run)
    _unmount_below(paths.root / "containerd")
    shutil.rmtree(paths.run, ignore_errors=True)
