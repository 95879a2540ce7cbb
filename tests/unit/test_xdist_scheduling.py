"""make test's scheduling over xdist workers (tests/xdist_scheduling.py): the files that share a
process go together, the rest by file, and a test that uses a shared process elsewhere is
marked to fail."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.xdist_scheduling import MISPLACED, check_items, scope_of


def test_files_that_share_a_process_share_a_scope() -> None:
    assert scope_of("tests/controlplane/test_rbac.py::test_x[a]") == "controlplane"
    assert scope_of("tests/controlplane/test_admission.py::test_y") == "controlplane"
    assert scope_of("tests/integration/test_deltaspark_features.py::test_z") == "deltaspark"
    # the longest group is split in two, each with its JVM
    assert scope_of("tests/integration/test_deltaspark_races.py::test_z") == "deltaspark-2"
    assert scope_of("tests/integration/test_spark_cluster.py::T::test_w") == "spark-cluster"
    # any other test: its file (its module fixtures are built once)
    assert scope_of("tests/integration/test_vacuum.py::test_v[p-1]") == (
        "tests/integration/test_vacuum.py"
    )
    assert scope_of("tests/unit/test_config.py::C::test_u") == "tests/unit/test_config.py"


@dataclass
class Item:
    nodeid: str
    fixturenames: list[str]
    marks: list[Any] = field(default_factory=list)

    def add_marker(self, mark: Any) -> None:
        self.marks.append(mark)


def test_a_test_that_uses_a_shared_process_elsewhere_is_marked() -> None:
    fine = Item("tests/integration/test_deltaspark_x.py::t", ["delta_spark", "tmp_path"])
    stray = Item("tests/integration/test_vacuum.py::t", ["delta_spark"])
    e2e = Item("tests/e2e/test_job_backend.py::t", ["delta_spark"])  # its tier's own fixture
    check_items([fine, stray, e2e])
    assert not fine.marks and not e2e.marks
    (mark,) = stray.marks
    assert mark.name == MISPLACED and "test_deltaspark_" in mark.args[0]
