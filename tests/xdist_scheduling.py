"""How ``make test`` spreads the suite over two pytest-xdist workers: by file, and the files that
share one expensive process per pytest process (a JVM, an API server) together.

A session fixture such as ``delta_spark`` (a delta-spark JVM) or ``control_plane`` (etcd and a
kube-apiserver) starts once per worker that needs it, and a module fixture (the delta-spark
feature matrix, minutes of JVM work) once per run of its module's tests in one worker; xdist's
plain ``load`` sends tests one by one, so both workers started both and the matrix was built
twice. Its ``loadgroup`` mode would keep marked tests together, but with pytest 9.2 it groups
nothing (it renames ``item._nodeid``, which pytest no longer reads), so the scopes are ours:

* every test of a file that shares a process runs in that process's one worker
  (``SHARED``: the files are named for it, and ``check_items`` holds them to it);
* every other file is one unit (its module fixtures are built once).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

#: (session fixture, the directory whose conftest defines it, the scope its files run in, how
#: those files are told from the nodeid); tests/e2e has a delta_spark of its own, and its tier
#: runs in one process (make e2e)
SHARED: tuple[tuple[str, str, str, str], ...] = (
    ("control_plane", "tests/controlplane/", "controlplane", "tests/controlplane/"),
    ("delta_spark", "tests/integration/", "deltaspark", "tests/integration/test_deltaspark_"),
    (
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
    for _, _, scope, prefix in SHARED:
        if path.startswith(prefix):
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
        for fixture, home, scope, prefix in SHARED:
            path = item.nodeid.split("::", 1)[0]
            if fixture in names and path.startswith(home) and scope_of(item.nodeid) != scope:
                why = (
                    f"{item.nodeid} uses the {fixture} fixture: put it in a file under "
                    f"{prefix!r} so make test's workers share one (tests/xdist_scheduling.py)"
                )
                item.add_marker(pytest.mark.misplaced_for_xdist(why))


def fail_misplaced(item: Any) -> None:
    """Fail a test ``check_items`` marked, with its reason."""
    mark = item.get_closest_marker(MISPLACED)
    if mark is not None:
        pytest.fail(str(mark.args[0]), pytrace=False)
