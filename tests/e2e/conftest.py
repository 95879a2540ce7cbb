"""Fixtures of the e2e tier: the real single-node cluster, helm and kubectl, pods to look with.

The tier runs only with ``--e2e`` (``make e2e``, which builds the node's binaries and the images
first) or ``TXNTABLE_E2E=1``; otherwise every test here is skipped with this reason, visibly
(``-ra``), never silently passed. It needs root (the node runs containers).

``real_cluster`` (session) -> ``tests.node.cluster.RealCluster``: etcd and kube-apiserver with a
real node (containerd, kubelet, kube-proxy, scheduler, controller-manager, CoreDNS) and every
image of ``make images`` imported under the names the chart uses. Stopped at the end of the
session: every pod removed, every process stopped.

``kube`` (session) -> ``Kube``: ``kubectl`` and ``helm`` (built from their Go modules) with an
admin kubeconfig, and the API client; ``namespace(name)`` creates a namespace that enforces the
restricted Pod Security level, as a careful platform team's namespaces do.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.support import Kube

REASON = (
    "e2e: needs the real single-node cluster (make e2e builds it; root); "
    "opt in with --e2e or TXNTABLE_E2E=1"
)


def enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("--e2e", default=False)) or os.environ.get("TXNTABLE_E2E") == "1"


@pytest.fixture(autouse=True, scope="session")
def _require_opt_in(request: pytest.FixtureRequest) -> None:
    if not enabled(request.config):
        pytest.skip(REASON)


#: seconds one e2e test may take (Spark runs in pods on two cores; the suite's default is 600)
E2E_TIMEOUT = 1800


#: modules that need a cluster no chart was installed in yet: they run first, before the
#: session's shared install (``operator``) exists. docs/install.md's routes install the chart
#: under their own release name, and Helm refuses CRDs another release owns; their clean-up
#: then deletes the CRDs the shared install's tables live in.
FIRST = ("test_install_doc.py",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("e2e") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT))
    items.sort(key=lambda item: item.path.name not in FIRST)  # stable: the rest keep their order


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The cluster; a SIGTERM to the test process stops it as Ctrl-C does (pytest's teardown
    runs), so a killed run leaves no etcd, API server, kubelet or pod behind."""
    from tests.node.cluster import RealCluster

    logdir = tmp_path_factory.mktemp("real-cluster-logs")
    previous = signal.signal(signal.SIGTERM, _interrupt)
    cluster = RealCluster.start(logdir)
    try:
        yield cluster
    finally:
        cluster.stop()
        signal.signal(signal.SIGTERM, previous)


@pytest.fixture(scope="session")
def kube(real_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Kube:
    from tests.node import binaries

    kubeconfig = real_cluster.plane.kubeconfig(tmp_path_factory.mktemp("kube") / "kubeconfig")
    bin_path = ":".join(
        [str(binaries.KUBERNETES.find()), str(binaries.HELM.find()), os.environ.get("PATH", "")]
    )
    return Kube(kubeconfig=kubeconfig, bin_path=bin_path, api=real_cluster.plane.client())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed and "real_cluster" in getattr(item, "fixturenames", ()):
        cluster = item.funcargs.get("real_cluster") if hasattr(item, "funcargs") else None
        if cluster is not None:
            report.sections.append(("real cluster logs", cluster.logs()))


@pytest.fixture(scope="session")
def delta_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """delta-spark (the reference implementation) in its own process, to read tables back."""
    from tests.deltaspark.client import DeltaSpark

    server = DeltaSpark(log_dir=tmp_path_factory.mktemp("deltaspark"))
    try:
        yield server
    finally:
        server.stop()


FIGURES = pytest.StashKey[list[tuple[str, str]]]()


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Any:
    """``figures(name, value)`` records a figure the session prints at its end."""
    found = request.config.stash.setdefault(FIGURES, [])

    def record(name: str, value: str) -> None:
        found.append((f"{request.node.name}: {name}", value))

    return record


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    found = config.stash.get(FIGURES, [])
    if found:
        terminalreporter.section("figures of the e2e tier")
        for name, value in found:
            terminalreporter.write_line(f"{name}: {value}")


@pytest.fixture
def made(kube: Kube) -> Iterator[list[str]]:
    """Names of the TxnTables a test made in the shared install's namespace, deleted (and
    waited for: the controller stops their runs) when it ends: the node's two cores fit one
    run at a time, so a table left behind would keep the next test's runs Pending."""
    from tests.e2e.lake import TABLES

    names: list[str] = []
    yield names
    for name in names:
        kube.kubectl("-n", TABLES, "delete", "txntable", name, "--ignore-not-found",
                     "--wait=true", "--timeout=300s", check=False)  # fmt: skip


@pytest.fixture(scope="session")
def store(kube: Kube) -> Any:
    """moto's S3 in a pod (``tests.e2e.store``), with the tier's bucket."""
    from tests.e2e.lake import BUCKET
    from tests.e2e.store import deploy

    found = deploy(kube, "e2e-store")
    found.create_bucket(BUCKET)
    return found


@pytest.fixture(scope="session")
def operator(kube: Kube, store: Any) -> Iterator[Any]:
    """The chart installed by helm as a user would (``tests.e2e.lake.install``), watching
    ``TABLES`` with the ``job`` default backend, a 5 s observe interval and finished runs kept
    ``RUN_TTL_SECONDS``; the store's
    credentials in a Secret there. Uninstalled at the end."""
    from tests.e2e import lake

    kube.namespace(lake.TABLES)
    kube.apply(store.secret(lake.TABLES))
    inst = lake.install(
        kube, lake.RELEASE, lake.SYSTEM, lake.TABLES,
        "config.defaultBackend=job", "config.observeIntervalSeconds=5",
        f"config.runTtlSeconds={lake.RUN_TTL_SECONDS}",
    )  # fmt: skip
    try:
        yield inst
    finally:
        lake.uninstall(kube, inst)
