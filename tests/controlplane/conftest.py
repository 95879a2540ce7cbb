"""Fixtures of the control-plane tests: a real kube-apiserver + etcd, the chart, the controller.

Every test in ``tests/controlplane/`` is marked ``controlplane`` and shares ONE control plane per
pytest session (starting one takes a few seconds; ``make test`` builds the binaries first, see
``tests.controlplane.binaries``). Tests isolate themselves by namespace, not by server.

Fixtures (all building blocks are plain classes, usable outside pytest too: ``make cluster``):

``control_plane`` (session) -> ``plane.ControlPlane``
    ``.url``, ``.ca_file``, ``.admin_token``; ``.client(token=None)`` a ``kubernetes``
    ApiClient (admin, in ``system:masters``, when no token); ``.kubeconfig(path, token=None,
    namespace=...)`` writes one; ``.audit_events()`` every request so far (Metadata level:
    user, verb, objectRef, responseStatus); ``.restart_apiserver()`` same port and data;
    ``.logs()`` tails of both logs. Missing binaries fail with the command that builds them.

``admin`` (session) -> ``kubernetes.client.ApiClient`` as the admin.

``namespace`` (function) -> a fresh namespace name (created by ``kube.ensure_namespace``, as
    every namespace of these tests: enforcing the restricted Pod Security level, with its
    ``default`` ServiceAccount; never deleted: no controller-manager finishes namespace
    deletion, and the server is per session anyway).

``installed`` (session) -> ``controller.Install``: the chart installed once by Helm's SDK as
    release ``txntable`` in ``txntable-system``, watching ``TABLES_NAMESPACE``
    (``txntable-tables``), with the ``job`` default backend and a 1 s observe interval. Tests
    that need other values call ``controller.install_chart(...)`` with their own release name
    and namespaces.

``start_controller`` (function) -> ``start(install=None, name="controller", env=None, wait=True)``
    runs ``python -m txntable`` as a real process with the controller image's environment
    (the Dockerfile's ENV, the chart's env over it, an empty directory for its WORKDIR) and a
    TokenRequest token of the chart's ServiceAccount (``controller.ControllerProcess``:
    ``.stop()`` SIGTERM, ``.kill()`` SIGKILL, ``.restart()``, ``.metrics()``, ``.logs()``).
    Every process started is stopped at teardown; its log is attached to a failed test.

``kubelet`` (session) -> ``standins.Kubelet``: a Node and the HTTPS endpoint the API server
    asks for pod logs (``GET pods/<name>/log``), serving the logs of the local processes that
    play containers.

``spark_crds`` (session): the Spark Operator's CRDs (shared/testdata/k8s) applied and
    Established. ``spark_install`` (session) -> ``Install``: a second release of the chart,
    ``txntable-spark`` in ``txntable-spark-system``, watching ``SPARK_NAMESPACE``
    (``txntable-spark-tables``) with the ``sparkapplication`` default backend and only that
    backend's RBAC.

``job_controller`` / ``spark_operator`` (function) -> ``standins.JobController`` /
    ``standins.SparkOperator``: the absent controllers, which run a run's container as a local
    process (``pod_runner``) and write pod and run status as the real ones do; every process
    they started is killed at teardown.

``kube.py`` has the client helpers: ``apply`` (server-side apply, for any size of object),
``apply_all`` (CRDs first, waits for Established), ``wait_for``, ``ensure_namespace``,
``service_account_token``, ``get_table``, ``condition``.

Known facts of this server (no kubelet, scheduler or controller-manager; the default admission
plugins on, ServiceAccount and PodSecurity among them): pods stay Pending; a pod must name an
existing ServiceAccount and meet the restricted level of its namespace;
no garbage collection of owned objects; no Job controller (a test writes Job status as the
Job controller would, and it must pass the server's validation); Kopf with a peering name waits
until the peering CRDs and the named peering object exist (the chart installs both).
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane import binaries
from tests.controlplane.controller import ControllerProcess, Install, install_chart
from tests.controlplane.plane import ControlPlane
from tests.controlplane.standins import JobController, Kubelet, SparkOperator
from tests.gobuild import GoTools

RELEASE = "txntable"
SYSTEM_NAMESPACE = "txntable-system"
TABLES_NAMESPACE = "txntable-tables"
#: chart values of the shared install: fast ticks, runs as batch Jobs (no Spark Operator here)
INSTALL_VALUES: dict[str, Any] = {
    "watch": {"namespaces": [TABLES_NAMESPACE]},
    "config": {"observeIntervalSeconds": 1, "defaultBackend": "job", "logFormat": "text"},
}
SPARK_NAMESPACE = "txntable-spark-tables"
#: the Spark Operator's CRDs (Kubeflow spark-operator), as a cluster with it installed has them
SPARK_CRDS = Path(__file__).resolve().parents[3] / "shared" / "testdata" / "k8s"

_PLANE_KEY = pytest.StashKey[ControlPlane]()
_CONTROLLERS_KEY = pytest.StashKey[list[ControllerProcess]]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.controlplane)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed:
        plane = item.session.stash.get(_PLANE_KEY, None)
        if plane is not None:
            report.sections.append(("control plane logs", plane.logs()))
        for proc in item.stash.get(_CONTROLLERS_KEY, []):
            report.sections.append((f"controller {proc.log.name}", proc.logs()))
    return report


@contextmanager
def started_plane(logdir: Path, tools: GoTools | None = None) -> Iterator[ControlPlane]:
    """A control plane of the built binaries (``tools``: another pinned release's, e.g.
    ``binaries.OLDEST``), logging into ``logdir``; stopped and its data removed on the way
    out. Missing binaries fail the test with the command that builds them."""
    try:
        bin_dir = (tools or binaries.CONTROLPLANE).find()
    except binaries.MissingBinariesError as exc:
        pytest.fail(str(exc), pytrace=False)
    workdir = Path(tempfile.mkdtemp(prefix="txntable-controlplane-"))
    plane = ControlPlane.start(bin_dir, workdir, logdir)
    try:
        yield plane
    finally:
        plane.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def control_plane(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    # its logs are kept by pytest (last 3 runs)
    with started_plane(tmp_path_factory.mktemp("controlplane-logs")) as plane:
        request.session.stash[_PLANE_KEY] = plane
        yield plane


@pytest.fixture(scope="session")
def admin(control_plane: ControlPlane) -> Any:
    return control_plane.client()


_namespaces = itertools.count(1)


@pytest.fixture
def namespace(admin: Any, request: pytest.FixtureRequest) -> str:
    from tests.controlplane.kube import ensure_namespace

    base = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    name = f"t{next(_namespaces)}-{base}"
    ensure_namespace(admin, name)
    return name


@pytest.fixture(scope="session")
def session_install(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Install:
    """The shared install itself (``installed`` by another name, which a module that
    overrides ``installed`` can still reach)."""
    return install_chart(
        control_plane,
        tmp_path_factory.mktemp("install"),
        release=RELEASE,
        namespace=SYSTEM_NAMESPACE,
        values=INSTALL_VALUES,
    )


@pytest.fixture(scope="session")
def installed(session_install: Install) -> Install:
    return session_install


@pytest.fixture
def start_controller(
    control_plane: ControlPlane, installed: Install, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., ControllerProcess]]:
    started: list[ControllerProcess] = []
    request.node.stash[_CONTROLLERS_KEY] = started

    def start(
        install: Install | None = None,
        *,
        name: str = "controller",
        env: dict[str, str] | None = None,
        wait: bool = True,
    ) -> ControllerProcess:
        proc = ControllerProcess.start(
            control_plane, install or installed, tmp_path / name, name=name, env=env, wait=False
        )
        started.append(proc)
        if wait:
            proc.wait_ready()
        return proc

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture(scope="session")
def kubelet(control_plane: ControlPlane) -> Iterator[Kubelet]:
    standin = Kubelet(control_plane).start()
    try:
        yield standin
    finally:
        standin.stop()


@pytest.fixture(scope="session")
def spark_crds(admin: Any) -> None:
    import yaml

    from tests.controlplane.kube import apply_all

    apply_all(admin, [yaml.safe_load(p.read_text()) for p in sorted(SPARK_CRDS.glob("*.yaml"))])


@pytest.fixture(scope="session")
def spark_install(
    control_plane: ControlPlane,
    installed: Install,
    spark_crds: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> Install:
    values = {
        "watch": {"namespaces": [SPARK_NAMESPACE]},
        "config": {**INSTALL_VALUES["config"], "defaultBackend": "sparkapplication"},
        "rbac": {"backends": ["sparkapplication"]},
        "crds": {"create": False},  # the shared install's
    }
    return install_chart(
        control_plane,
        tmp_path_factory.mktemp("spark-install"),
        release="txntable-spark",
        namespace="txntable-spark-system",
        values=values,
    )


@pytest.fixture
def job_controller(admin: Any, kubelet: Kubelet, tmp_path: Path) -> Iterator[JobController]:
    standin = JobController(admin, kubelet, tmp_path / "pods")
    try:
        yield standin
    finally:
        for pod in standin.pods.values():
            pod.kill()


@pytest.fixture
def spark_operator(
    admin: Any, kubelet: Kubelet, spark_crds: None, tmp_path: Path
) -> Iterator[SparkOperator]:
    standin = SparkOperator(admin, kubelet, tmp_path / "pods")
    try:
        yield standin
    finally:
        for pod in standin.drivers.values():
            pod.kill()
