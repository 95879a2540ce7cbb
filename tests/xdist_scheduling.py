"""How ``make test`` spreads the suite over two pytest-xdist workers: by file, and the files that
share one expensive process per pytest process (a JVM, an API server) together.

A session fixture such as ``delta_spark`` (a delta-spark JVM) or ``control_plane`` (etcd and a
kube-apiserver) starts once per worker that needs it, and a module fixture (the delta-spark
feature matrix, minutes of JVM work) once per run of its module's tests in one worker; xdist's
plain ``load`` sends tests one by one, so both workers started both and the matrix was built
twice. Its ``loadgroup`` mode would keep marked tests together, but with pytest 9.2 it groups
nothing (it renames ``item._nodeid``, which pytest no longer reads), so the scopes are ours:

* every test of a file that shares a process runs in that process's one worker
  (``SHARED``: the files are named for it, and ``check_items`` holds them to it); the
  delta-spark files, the longest group, in two such groups (two JVMs, one per worker);
* every other file is one unit (its module fixtures are built once).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling


@dataclass(frozen=True)
class Shared:
    """A session fixture's process and the files that share it."""

    #: the session fixture
    fixture: str
    #: the directory whose conftest defines it
    home: str
    #: the scope its files run in
    scope: str
    #: how those files are told from the nodeid
    prefix: str
    #: files (by the name after ``prefix``) that share a second such process, in scope
    #: ``<scope>-2``: the group is the longest chain of the suite, and on one worker the
    #: other waited idle for it at the end
    second: tuple[str, ...] = ()

    def scope_of(self, path: str) -> str | None:
        if not path.startswith(self.prefix):
            return None
        return f"{self.scope}-2" if path[len(self.prefix) :].startswith(self.second) else self.scope


#: tests/e2e has a delta_spark of its own, and its tier runs in one process (make e2e)
SHARED: tuple[Shared, ...] = (
    Shared("control_plane", "tests/controlplane/", "controlplane", "tests/controlplane/"),
    Shared(
        "delta_spark",
        "tests/integration/",
        "deltaspark",
        "tests/integration/test_deltaspark_",
        second=(
            "races",
            "cdf_dv",
            "dv_purge",
            "partition_values",
            "row_tracking_combined",
            "spark_executor",
            "stream_source",
            "time_travel",
        ),
    ),
    Shared(
        "spark_cluster",
        "tests/integration/",
        "spark-cluster",
        "tests/integration/test_spark_cluster",
    ),
)
#: the marker a misplaced test carries (``check_items``), with why, failing it at setup
MISPLACED = "misplaced_for_xdist"


def scope_of(nodeid: str) -> str:
    """The unit ``nodeid`` is scheduled in: its shared process's name, else its file."""
    path = nodeid.split("::", 1)[0]
    for shared in SHARED:
        scope = shared.scope_of(path)
        if scope is not None:
            return scope
    return path


class SharedProcessScheduling(LoadScopeScheduling):
    """xdist's ``loadscope`` with ``scope_of`` as the scope."""

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)


def check_items(items: Sequence[Any]) -> None:
    """Mark every test that uses a shared process's fixture but lives where ``scope_of`` does
    not put it in that process's scope (its worker would start the process again): it fails at
    setup saying where it belongs (``fail_misplaced``). Not an error at collection: an xdist
    worker whose collection fails dies without a word."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        for shared in SHARED:
            path = item.nodeid.split("::", 1)[0]
            if (
                shared.fixture in names
                and path.startswith(shared.home)
                and shared.scope_of(path) is None
            ):
                why = (
                    f"{item.nodeid} uses the {shared.fixture} fixture: put it in a file under "
                    f"{shared.prefix!r} so make test's workers share one "
                    "(tests/xdist_scheduling.py)"
                )
                item.add_marker(pytest.mark.misplaced_for_xdist(why))


def fail_misplaced(item: Any) -> None:
    """Fail a test ``check_items`` marked, with its reason."""
    mark = item.get_closest_marker(MISPLACED)
    if mark is not None:
        pytest.fail(str(mark.args[0]), pytrace=False)
