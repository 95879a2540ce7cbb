"""What pyproject.toml promises the images and `make setup`.

The controller image installs the package with the ``s3`` extra only, so no module of the
package may import pyspark or deltalake when it is imported (they are the ``spark`` and
``demo`` extras); ``dev`` pulls every extra so the tests have all they exercise; the build
backend floor understands the PEP 639 ``license`` string the project uses.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

REPO = Path(__file__).resolve().parents[3]
PYPROJECT: dict[str, Any] = tomllib.loads((REPO / "pyproject.toml").read_text())
EXTRAS: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]

_BLOCKED_IMPORT = """
import importlib, pkgutil, sys

class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pyspark", "deltalake", "py4j"):
            raise ImportError(f"{name} is not installed in the controller image")
        return None

sys.meta_path.insert(0, Block())
import txntable
names = [m.name for m in pkgutil.walk_packages(txntable.__path__, "txntable.")]
for name in names:
    importlib.import_module(name)
from txntable.handlers import kopf_handlers  # what python -m txntable loads
assert not {m.split(".")[0] for m in sys.modules} & {"pyspark", "deltalake", "py4j"}
print(len(names))
"""


def _names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name.lower() for r in requirements}


def test_no_module_imports_pyspark_or_deltalake_at_import_time() -> None:
    """The controller image has neither; importing any module (as Kopf's handlers and the CLI
    do) must work without them: their imports stay inside the Spark and demo code paths."""
    done = subprocess.run(
        [sys.executable, "-c", _BLOCKED_IMPORT],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.strip()) > 50


def test_base_dependencies_leave_spark_deltalake_and_boto3_to_extras() -> None:
    base = _names(PYPROJECT["project"]["dependencies"])
    assert not base & {"pyspark", "deltalake", "boto3", "azure-storage-blob"}
    assert _names(EXTRAS["s3"]) == {"boto3"}
    assert _names(EXTRAS["azure"]) == {"azure-storage-blob", "azure-identity"}
    assert _names(EXTRAS["spark"]) == {"pyspark"}
    assert _names(EXTRAS["demo"]) == {"deltalake"}


def test_dev_installs_every_extra_the_tests_use() -> None:
    """`make setup` is pip install -e '.[dev]': it must bring boto3, the Azure clients,
    pyspark and deltalake."""
    own = [Requirement(r) for r in EXTRAS["dev"] if Requirement(r).name == "txntable"]
    assert len(own) == 1
    assert own[0].extras >= {"s3", "azure", "spark", "demo"}
    assert "moto" in _names(EXTRAS["dev"])


def test_setuptools_floor_reads_the_license_expression() -> None:
    assert isinstance(PYPROJECT["project"]["license"], str)  # PEP 639 SPDX expression
    requires = [Requirement(r) for r in PYPROJECT["build-system"]["requires"]]
    setuptools = [r for r in requires if r.name == "setuptools"]
    assert len(setuptools) == 1
    spec: SpecifierSet = setuptools[0].specifier
    # 77.0.0 added license expressions, 77.0.3 fixed their first bugs
    assert not spec.contains("76.1.0") and not spec.contains("77.0.2")
    assert spec.contains("77.0.3") and spec.contains("80.9.0")
