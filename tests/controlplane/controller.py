"""The chart installed on the test control plane, and the controller run as a real process.

Why: in a cluster the controller is ``python -m txntable`` (the image's entry point) with the
chart's ``TXNTABLE_*`` environment, a ServiceAccount token, and the RBAC the chart grants. Here
the same: ``install_chart`` installs the chart with Helm's own Go SDK (helm-python-sdk's
``Config.install``, as ``helm install`` would: CRDs from crds/ first, then every template), and
``ControllerProcess.start`` runs ``python -m txntable`` with the rendered Deployment's
environment, a kubeconfig holding a token for the chart's ServiceAccount obtained through the
TokenRequest API, and nothing else: the production client path (kubeconfig), the chart's RBAC.

No kubelet runs the Deployment's pod; the test process stands in for it, and starts the
controller as the kubelet starts the container: the controller image's environment, not the
test's. The process gets only the ``ENV`` of the Dockerfile's ``controller`` stage (read by
``tests.dockerfile``, over ``BASE_IMAGE_ENV``), then the rendered Deployment's ``env`` (which
wins, as a pod's ``env`` wins over the image's), then the kubeconfig; its working directory is
a fresh empty directory standing for the image's ``WORKDIR``, and its command is the image's
``ENTRYPOINT`` (``python -m txntable``) found on that ``PATH``. Nothing of the test process is
inherited (no ``PYTHONPATH``, not the checkout as working directory): what the image lacks, the
controller lacks here too. What differs from the pod, and only that:

* the image's paths: ``/opt/venv`` is this machine's virtual environment (its ``python``), and
  each emptyDir the Deployment mounts (``/tmp``, also the ``WORKDIR`` and ``HOME``) is a
  directory of this controller, which ``restart`` keeps, as the kubelet keeps a pod's emptyDir
  across container restarts;
* the pod's network: the metrics and health ports are free ports (several controllers run side
  by side on this host), and the API server is reached through a kubeconfig holding a
  TokenRequest token of the chart's ServiceAccount instead of the mounted token;
* variables a test adds for itself (``env=``: test hooks, a shorter retry).
"""

from __future__ import annotations

import http.client
import json
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helm_python
import yaml

from tests.controlplane.kube import ensure_namespace, service_account_token, wait_established
from tests.controlplane.plane import ControlPlane, free_port, stop_process, tail
from tests.controlplane.pod_runner import Adaptation
from tests.dockerfile import parse

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "txntable-operator"
DOCKERFILE = REPO / "Dockerfile"
#: the Dockerfile's stage the controller image is built from
IMAGE_STAGE = "controller"
#: where the controller image keeps its virtual environment (the Dockerfile's build stages)
IMAGE_VENV = "/opt/venv"
#: what the external base image (python:3.11-slim-bookworm) sets that the controller stage's
#: ENV builds on: its PATH (Debian's, with the python image's /usr/local/bin first). The base's
#: other variables (LANG=C.UTF-8, PYTHON_VERSION, GPG_KEY) are not set: Python coerces the C
#: locale to UTF-8 by itself (PEP 538), and nothing of ours reads the others.
BASE_IMAGE_ENV = {
    "PATH": "/usr/local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
}
#: seconds for the controller's liveness endpoint to answer after start (imports + startup)
START_TIMEOUT = 60.0


@dataclass
class Install:
    """A Helm release of the chart on the control plane."""

    release: str
    namespace: str
    watch: list[str]
    values: dict[str, Any]
    objects: list[dict[str, Any]]
    kubeconfig: Path

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o.get("kind") == kind]

    @property
    def deployment(self) -> dict[str, Any]:
        (found,) = self.of_kind("Deployment")
        return found

    @property
    def service_account(self) -> str:
        return str(self.deployment["spec"]["template"]["spec"]["serviceAccountName"])

    @property
    def user(self) -> str:
        """The controller's user name as the API server (and its audit log) knows it."""
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"

    def env(self, pod: str) -> dict[str, str]:
        """The controller container's environment as the chart renders it, in pod ``pod``:
        the downward API's fields filled in as the kubelet fills them (the pod's name and
        namespace)."""
        container = self.deployment["spec"]["template"]["spec"]["containers"][0]
        fields = {"metadata.name": pod, "metadata.namespace": self.namespace}
        env = {}
        for e in container.get("env", []):
            ref = e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
            env[e["name"]] = fields[ref] if ref else str(e.get("value", ""))
        return env

    def empty_dirs(self) -> list[str]:
        """Where the controller container mounts the Deployment's emptyDir volumes."""
        spec = self.deployment["spec"]["template"]["spec"]
        empty = {v["name"] for v in spec.get("volumes") or () if "emptyDir" in v}
        mounts = spec["containers"][0].get("volumeMounts") or ()
        return [m["mountPath"] for m in mounts if m["name"] in empty]


@dataclass
class ImageProcess:
    """How the controller container starts here: command, environment, working directory."""

    command: list[str]
    env: dict[str, str]
    cwd: Path


def image_process(install: Install, pod_dir: Path, pod: str) -> ImageProcess:
    """The controller container of ``install``'s Deployment, as pod ``pod`` would start it, its
    image paths under ``pod_dir`` (see the module docstring): the image's ENV (Dockerfile), the
    chart's env over it, the image's ENTRYPOINT found on the resulting PATH, in a fresh empty
    directory standing for the image's WORKDIR."""
    image = parse(DOCKERFILE.read_text()).environment(IMAGE_STAGE, BASE_IMAGE_ENV)
    venv = Path(sys.prefix)
    paths = {IMAGE_VENV: str(venv)}
    for mount in install.empty_dirs():
        paths[mount] = str(pod_dir / "volumes" / mount.strip("/").replace("/", "-"))
    if image.workdir not in paths:
        paths[image.workdir] = str(pod_dir / "workdir")
    for path in paths.values():
        Path(path).mkdir(parents=True, exist_ok=True)
    adapt = Adaptation(paths)
    env = {k: adapt(v) for k, v in image.env.items()} | install.env(pod)
    cwd = Path(adapt(image.workdir))
    if any(cwd.iterdir()):
        raise RuntimeError(f"{cwd} stands for the image's WORKDIR and must start empty")
    program = shutil.which(image.entrypoint[0], path=env.get("PATH", ""))
    if program is None or not Path(program).is_relative_to(venv):
        raise RuntimeError(
            f"the image's ENTRYPOINT {image.entrypoint} resolves to {program} on the image's "
            f"PATH {env.get('PATH')!r}, not into this virtual environment {venv}"
        )
    return ImageProcess([program, *image.entrypoint[1:]], env, cwd)


def helm_config(plane: ControlPlane, kubeconfig: Path, namespace: str) -> helm_python.Config:
    return helm_python.Config(kubeconfig_path=kubeconfig, namespace=namespace)


def install_chart(
    plane: ControlPlane,
    workdir: Path,
    *,
    release: str,
    namespace: str,
    values: dict[str, Any] | None = None,
    chart: Path = CHART,
) -> Install:
    """``helm install`` the chart (release ``release`` in ``namespace``) as the admin; the
    watched namespaces and those of ``spark.namespaces`` are created first (the chart puts
    Roles, peering objects and the Spark drivers' ServiceAccount there)."""
    values = dict(values or {})
    watch = list((values.get("watch") or {}).get("namespaces") or [namespace])
    spark = list((values.get("spark") or {}).get("namespaces") or [])
    api = plane.client()
    for ns in sorted({namespace, *watch, *spark}):
        ensure_namespace(api, ns)
    kubeconfig = plane.kubeconfig(workdir / f"admin-{release}.kubeconfig", namespace=namespace)
    cfg = helm_config(plane, kubeconfig, namespace)
    out = cfg.install(str(chart), release, values, namespace=namespace, timeout=120)
    objects = [d for d in yaml.safe_load_all(out["manifest"]) if d]
    crds = [o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"]
    wait_established(api, crds)
    return Install(release, namespace, watch, values, objects, kubeconfig)


def upgrade_chart(
    plane: ControlPlane, install: Install, values: dict[str, Any] | None = None, chart: Path = CHART
) -> Install:
    """``helm upgrade`` the release to ``chart`` (the same values unless given)."""
    values = dict(install.values if values is None else values)
    cfg = helm_config(plane, install.kubeconfig, install.namespace)
    out = cfg.upgrade(str(chart), install.release, values, namespace=install.namespace, timeout=120)
    objects = [d for d in yaml.safe_load_all(out["manifest"]) if d]
    crds = [o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"]
    wait_established(plane.client(), crds)
    return Install(
        install.release, install.namespace, install.watch, values, objects, install.kubeconfig
    )


def uninstall_chart(plane: ControlPlane, install: Install) -> dict[str, Any]:
    cfg = helm_config(plane, install.kubeconfig, install.namespace)
    return dict(cfg.uninstall(install.release, timeout=120))


@dataclass
class ControllerProcess:
    """``python -m txntable`` against the control plane, as the chart's ServiceAccount."""

    install: Install
    proc: subprocess.Popen[bytes]
    log: Path
    #: the process's whole environment (``image_process``'s, ports, kubeconfig, test additions)
    env: dict[str, str]
    health_port: int
    metrics_port: int
    #: the image's ENTRYPOINT, its program found on the image's PATH
    command: list[str]
    #: the directory standing for the image's WORKDIR
    cwd: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def start(
        cls,
        plane: ControlPlane,
        install: Install,
        workdir: Path,
        *,
        name: str = "controller",
        env: dict[str, str] | None = None,
        token_seconds: int = 3600,
        wait: bool = True,
    ) -> ControllerProcess:
        """Start the controller; with ``wait``, return once its liveness endpoint answers
        (Kopf has run the startup handler). ``env`` adds or overrides variables."""
        workdir.mkdir(parents=True, exist_ok=True)
        token = service_account_token(
            plane.client(), install.namespace, install.service_account, token_seconds
        )
        kubeconfig = plane.kubeconfig(
            workdir / f"{name}.kubeconfig", token=token, namespace=install.namespace
        )
        health, metrics = free_port(), free_port()
        # a pod of its own (its name is Kopf's peering identity); ``restart`` keeps it, as the
        # kubelet restarts a crashed container in the same pod
        pod = f"{install.release}-{name}-{secrets.token_hex(3)}"
        container = image_process(install, Path(tempfile.mkdtemp(prefix="pod-", dir=workdir)), pod)
        full = container.env | {
            "KUBECONFIG": str(kubeconfig),
            "TXNTABLE_HEALTH_PORT": str(health),
            "TXNTABLE_METRICS_PORT": str(metrics),
        }
        full |= env or {}
        log = workdir / f"{name}.log"
        proc = cls._spawn(container.command, full, container.cwd, log)
        started = cls(
            install, proc, log, full, health, metrics, container.command, container.cwd,
            dict(env or {}),
        )  # fmt: skip
        if wait:
            started.wait_ready()
        return started

    @staticmethod
    def _spawn(
        command: list[str], env: dict[str, str], cwd: Path, log: Path
    ) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)

    def healthy(self) -> bool:
        """Whether Kopf's liveness endpoint answers 200 with its JSON report (another process
        that took the port in a race answers something else)."""
        try:
            url = f"http://127.0.0.1:{self.health_port}/healthz"
            with urllib.request.urlopen(url, timeout=2) as resp:
                return int(resp.status) == 200 and isinstance(json.loads(resp.read()), dict)
        except (OSError, http.client.HTTPException, ValueError):
            return False

    def wait_ready(self, timeout: float = START_TIMEOUT, attempts: int = 3) -> None:
        """Wait until healthy; a controller that lost one of its free ports to another process
        before binding it exits, and is started again on new ports."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                lost_port = "address already in use" in tail(self.log, 40).lower()
                if lost_port and attempts > 1:
                    attempts -= 1
                    self._new_ports()
                    continue
                raise RuntimeError(f"controller exited with {self.proc.returncode}:\n{self.logs()}")
            if self.healthy():
                return
            time.sleep(0.2)
        raise TimeoutError(f"controller not healthy after {timeout:.0f} s:\n{self.logs()}")

    def _new_ports(self) -> None:
        self.health_port, self.metrics_port = free_port(), free_port()
        self.env |= {
            "TXNTABLE_HEALTH_PORT": str(self.health_port),
            "TXNTABLE_METRICS_PORT": str(self.metrics_port),
        }
        with self.log.open("ab") as out:
            out.write(b"\n=== started again on new ports (one was taken)\n")
        self.proc = self._spawn(self.command, self.env, self.cwd, self.log)

    def metrics(self) -> str:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5
        ) as resp:
            return bytes(resp.read()).decode()

    def stop(self, grace: float = 30.0) -> int:
        """SIGTERM (as the kubelet stops a pod), SIGKILL after ``grace``; the exit code."""
        stop_process(self.proc, grace)
        return int(self.proc.returncode)

    def kill(self) -> None:
        """SIGKILL: the pod dies without cleanup (node loss, OOM kill)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def restart(self, *, wait: bool = True) -> None:
        """Start the same controller again (same token, ports and environment, same pod: as
        the kubelet restarts a container that crashed)."""
        if self.proc.poll() is None:
            self.stop()
        with self.log.open("ab") as out:
            out.write(b"\n=== restarted\n")
        self.proc = self._spawn(self.command, self.env, self.cwd, self.log)
        if wait:
            self.wait_ready()

    def logs(self, lines: int = 80) -> str:
        return f"--- {self.log}\n{tail(self.log, lines)}"
