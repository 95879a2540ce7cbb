"""A real Kubernetes control plane for tests: upstream etcd and kube-apiserver as local processes.

Why: kmock emulates the API; this is the API. The processes are the mains built by
``tests.controlplane.binaries``, started the way controller-runtime's envtest starts them, on
127.0.0.1 with free ports, with what a cluster's API server has that the controller meets:
TLS with its own CA, RBAC authorization, bearer tokens (a static admin in ``system:masters``
and ServiceAccount tokens from the TokenRequest API, signed by a key made here), audit logging
of every request (the RBAC analysis reads it), admission (CEL, schema validation and pruning,
and the default admission plugins, ServiceAccount and PodSecurity among them, plus
OwnerReferencesPermissionEnforcement). Unlike envtest, nothing is turned off to make the tests
easier: a pod naming a ServiceAccount that does not exist is refused, and every namespace the
tests make enforces the restricted Pod Security level (``kube.ensure_namespace``).

What is absent, as with envtest: kubelet, scheduler and controller-manager. Pods stay Pending,
nothing garbage-collects owned objects, namespaces never finish deleting, no Job controller,
and no ServiceAccount controller: whatever makes a namespace also makes its ``default``
ServiceAccount (``kube.ensure_default_service_account``; ``start`` does it for the namespaces
the API server makes itself). Tests play those parts.

``ControlPlane.start(bin_dir, workdir, logdir)`` starts both and waits for ``/readyz``;
``stop()`` sends SIGTERM, then SIGKILL after a grace period, and removes ``workdir`` (etcd's
data, keys, tokens); logs stay in ``logdir``. ``restart_apiserver()`` stops and starts the API
server alone, on the same port and etcd (clients reconnect; the data stays).
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.controlplane.binaries import APISERVER, ETCD
from tests.controlplane.kube import ensure_default_service_account, wait_for
from tests.controlplane.pki import write_pki
from tests.kubeconfig import write_kubeconfig

ADMIN_USER = "txntable-admin"
#: the namespaces the API server makes itself (the ServiceAccount controller would give each its
#: ``default`` ServiceAccount; ``start`` does, in its stead)
BUILTIN_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
#: seconds for /readyz (the API server installs its built-in objects and RBAC roles first)
READY_TIMEOUT = 90.0
#: seconds between SIGTERM and SIGKILL when stopping a process
STOP_GRACE = 15.0

#: Every request at Metadata level (user, verb, resource, namespace, response code, RBAC
#: decision), which is what the RBAC analysis needs; request bodies are not logged, except for
#: writes of a TxnTable's status: those at RequestResponse level (the patch sent and the object
#: the server kept after pruning it to the schema, which the status-pruning test compares).
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "RequestResponse",
            "verbs": ["patch", "update"],
            "resources": [{"group": "txntable.io", "resources": ["txntables/status"]}],
        },
        {  # what the controller writes to a table's object itself (Kopf's finalizer)
            "level": "Request",
            "verbs": ["patch", "update"],
            "resources": [{"group": "txntable.io", "resources": ["txntables"]}],
        },
        {"level": "Metadata"},
    ],
}


@dataclass(frozen=True)
class NodeAccess:
    """What the API server needs when a real node joins it (``tests.node``).

    ``ip`` is the node's address, which the server advertises as the ``kubernetes`` Service's
    endpoint; ``tokens`` are (token, user, groups) rows of the node's components (the kubelet
    as ``system:node:<name>``, the controller-manager, the scheduler, kube-proxy), which the
    default RBAC and the Node authorizer know by those names.
    """

    ip: str
    tokens: tuple[tuple[str, str, tuple[str, ...]], ...]
    service_cidr: str = "10.0.0.0/24"


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_process(proc: subprocess.Popen[bytes], grace: float = STOP_GRACE) -> None:
    """SIGTERM, then SIGKILL if it has not exited after ``grace`` seconds; reaps it."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=grace)


def tail(path: Path, lines: int = 60) -> str:
    """The last ``lines`` lines of a log file (for failure reports)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return f"({path} does not exist)"


@dataclass
class ControlPlane:
    """A running etcd + kube-apiserver pair. See the module docstring."""

    bin_dir: Path
    workdir: Path
    logdir: Path
    port: int = 0
    etcd_port: int = 0
    admin_token: str = field(default_factory=lambda: secrets.token_hex(16))
    pki: dict[str, Path] = field(default_factory=dict)
    etcd: subprocess.Popen[bytes] | None = None
    apiserver: subprocess.Popen[bytes] | None = None
    #: (began, ready again) of each ``restart_apiserver``, UTC
    restarts: list[tuple[dt.datetime, dt.datetime]] = field(default_factory=list)
    #: set when a real node joins (``tests.node``): see ``NodeAccess``
    node: NodeAccess | None = None

    # -- addresses and files ---------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> Path:
        return self.pki["ca"]

    @property
    def audit_log(self) -> Path:
        return self.logdir / "audit.log"

    @property
    def apiserver_log(self) -> Path:
        return self.logdir / "kube-apiserver.log"

    @property
    def etcd_log(self) -> Path:
        return self.logdir / "etcd.log"

    # -- start and stop --------------------------------------------------------------------

    @classmethod
    def start(
        cls, bin_dir: Path, workdir: Path, logdir: Path, node: NodeAccess | None = None
    ) -> ControlPlane:
        workdir.mkdir(parents=True, exist_ok=True)
        logdir.mkdir(parents=True, exist_ok=True)
        plane = cls(bin_dir=bin_dir, workdir=workdir, logdir=logdir, node=node)
        plane.pki = write_pki(workdir / "pki", node_ip=node.ip if node else None)
        rows = [(plane.admin_token, ADMIN_USER, ("system:masters",))]
        rows += list(node.tokens) if node else []
        (workdir / "tokens.csv").write_text(
            "".join(f'{token},{user},{user},"{",".join(groups)}"\n' for token, user, groups in rows)
        )
        (workdir / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY))
        try:
            plane._start_etcd()
            plane._start_apiserver(new_port=True)
            plane._default_service_accounts()
        except BaseException:
            plane.stop()
            raise
        return plane

    def _default_service_accounts(self) -> None:
        """The ``default`` ServiceAccount of each namespace the API server makes itself (it
        makes them just after /readyz), as the absent ServiceAccount controller would."""
        api = self.client()
        for namespace in BUILTIN_NAMESPACES:

            def made(ns: str = namespace) -> bool:
                ensure_default_service_account(api, ns)
                return True

            wait_for(f"the default ServiceAccount of {namespace}", made, timeout=30)

    def _start_etcd(self, attempts: int = 3) -> None:
        for attempt in range(attempts):
            self.etcd_port, peer = free_port(), free_port()
            client, peer_url = f"http://127.0.0.1:{self.etcd_port}", f"http://127.0.0.1:{peer}"
            args = [
                str(self.bin_dir / ETCD),
                "--name=default",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--unsafe-no-fsync=true",  # test data: speed over durability
                "--log-level=warn",
            ]
            self.etcd = self._spawn(args, self.etcd_log)
            if self._wait_http(f"{client}/health", self.etcd, 30.0, lambda b: b"true" in b):
                return
            stop_process(self.etcd)
            if attempt == attempts - 1 or "address already in use" not in tail(self.etcd_log):
                raise RuntimeError(f"etcd did not start:\n{tail(self.etcd_log)}")

    def _apiserver_args(self) -> list[str]:
        w, p = self.workdir, self.pki
        if self.node is not None:
            return self._node_apiserver_args()
        return [
            str(self.bin_dir / APISERVER),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",  # no default route on the test machines
            # the `kubernetes` Service's endpoints may not be loopback addresses: no reconciler
            "--endpoint-reconciler-type=none",
            f"--secure-port={self.port}",
            f"--cert-dir={w / 'certs'}",
            f"--tls-cert-file={p['cert']}",
            f"--tls-private-key-file={p['key']}",
            "--service-cluster-ip-range=10.0.0.0/24",
            f"--service-account-issuer={self.url}",
            f"--service-account-key-file={p['sa_pub']}",
            f"--service-account-signing-key-file={p['sa_key']}",
            f"--token-auth-file={w / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            # the default admission plugins stay on (ServiceAccount, PodSecurity, ...); the
            # part of the absent controller-manager they need is played by kube.ensure_namespace
            # as OpenShift: creating an object with a blockOwnerDeletion owner reference needs
            # update on the owner's finalizers (the chart grants it for runs' TxnTables)
            "--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
            "--allow-privileged=true",
            # the stand-in kubelet (pod logs) serves a certificate of this CA: verified
            f"--kubelet-certificate-authority={p['ca']}",
            f"--audit-policy-file={w / 'audit-policy.yaml'}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",  # every request is in the file once it is answered
            # never rotated (the default rotates at 100 MB): readers tail the one file, and
            # bench-scale's 3,000 tables wrote 100 MB of status writes before its window
            "--audit-log-maxsize=1000000",
            "--profiling=false",
        ]

    def _node_apiserver_args(self) -> list[str]:
        """The API server of a cluster with a real node: it listens on every address and
        advertises the node's (pods reach it through the ``kubernetes`` Service, whose
        endpoint the server keeps), authorizes kubelets with the Node authorizer and
        NodeRestriction, and calls them with a client certificate of its own."""
        assert self.node is not None
        w, p = self.workdir, self.pki
        return [
            str(self.bin_dir / APISERVER),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=0.0.0.0",
            f"--advertise-address={self.node.ip}",
            f"--secure-port={self.port}",
            f"--cert-dir={w / 'certs'}",
            f"--tls-cert-file={p['cert']}",
            f"--tls-private-key-file={p['key']}",
            f"--client-ca-file={p['ca']}",
            f"--service-cluster-ip-range={self.node.service_cidr}",
            f"--service-account-issuer={self.url}",
            f"--service-account-key-file={p['sa_pub']}",
            f"--service-account-signing-key-file={p['sa_key']}",
            f"--token-auth-file={w / 'tokens.csv'}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction,OwnerReferencesPermissionEnforcement",
            f"--kubelet-certificate-authority={p['ca']}",
            f"--kubelet-client-certificate={p['kubelet_client_cert']}",
            f"--kubelet-client-key={p['kubelet_client_key']}",
            "--kubelet-preferred-address-types=InternalIP",
            f"--audit-policy-file={w / 'audit-policy.yaml'}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
            "--profiling=false",
        ]

    def _start_apiserver(self, *, new_port: bool, attempts: int = 3) -> None:
        for attempt in range(attempts):
            if new_port or attempt:
                self.port = free_port()
            self.apiserver = self._spawn(self._apiserver_args(), self.apiserver_log)
            if self._wait_http(f"{self.url}/readyz", self.apiserver, READY_TIMEOUT):
                return
            stop_process(self.apiserver)
            log = tail(self.apiserver_log)
            if attempt == attempts - 1 or "address already in use" not in log:
                raise RuntimeError(f"kube-apiserver did not become ready:\n{log}")

    def _spawn(self, args: list[str], log: Path) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            out.write(f"\n=== {' '.join(args)}\n".encode())
            out.flush()
            return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir)

    def _wait_http(
        self, url: str, proc: subprocess.Popen[bytes], timeout: float, ok: Any = None
    ) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return False
            try:
                status, body = self.get(url)
                if status == 200 and (ok is None or ok(body)):
                    return True
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.2)
        return False

    def restart_apiserver(self) -> None:
        """Stop the API server and start it again on the same port, etcd and keys. Until it is
        ready again the window is in ``restarts``: a restarted server answers requests before
        its RBAC authorizer has synced, and refuses them (403) for that moment."""
        began = dt.datetime.now(dt.UTC)
        if self.apiserver is not None:
            stop_process(self.apiserver)
        self._start_apiserver(new_port=False)
        self.restarts.append((began, dt.datetime.now(dt.UTC)))

    def while_restarting(self, event: dict[str, Any]) -> bool:
        """Whether the audit ``event`` was answered while the API server was restarting."""
        stamp = dt.datetime.fromisoformat(str(event.get("stageTimestamp")))
        return any(began <= stamp <= ready for began, ready in self.restarts)

    def stop(self) -> None:
        """Stop both processes (SIGTERM, then SIGKILL) and remove the work directory."""
        for proc in (self.apiserver, self.etcd):
            if proc is not None:
                stop_process(proc)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def logs(self, lines: int = 60) -> str:
        """The last lines of both logs (for a failed test's report)."""
        return (
            f"--- {self.apiserver_log}\n{tail(self.apiserver_log, lines)}\n"
            f"--- {self.etcd_log}\n{tail(self.etcd_log, lines)}"
        )

    # -- clients ---------------------------------------------------------------------------

    def get(self, url: str, token: str | None = None) -> tuple[int, bytes]:
        """GET ``url`` (absolute, or a path on the API server) as the admin or ``token``."""
        if url.startswith("/"):
            url = self.url + url
        req = urllib.request.Request(url)
        if url.startswith("https:"):
            req.add_header("Authorization", f"Bearer {token or self.admin_token}")
        context = ssl.create_default_context(cafile=str(self.ca_file)) if self.pki else None
        try:
            with urllib.request.urlopen(req, timeout=5, context=context) as resp:
                return int(resp.status), bytes(resp.read())
        except urllib.error.HTTPError as exc:
            return int(exc.code), bytes(exc.read())

    def kubeconfig(self, path: Path, token: str | None = None, namespace: str = "default") -> Path:
        """Write a kubeconfig for ``token`` (the admin's when None) and return its path."""
        return write_kubeconfig(
            path, self.url, token or self.admin_token, ca_file=self.ca_file, namespace=namespace
        )

    def client(self, token: str | None = None) -> Any:
        """A ``kubernetes.client.ApiClient`` for ``token`` (the admin's when None)."""
        from kubernetes import client

        conf = client.Configuration(host=self.url)
        conf.ssl_ca_cert = str(self.ca_file)
        conf.api_key = {"authorization": f"Bearer {token or self.admin_token}"}
        return client.ApiClient(conf)

    def audit_events(self) -> list[dict[str, Any]]:
        """Every audit event so far (one JSON object per line of the audit log)."""
        out = []
        with self.audit_log.open() as f:
            for line in f:
                if line.strip():
                    out.append(json.loads(line))
        return out
