"""The source root ``operator/`` must never shadow the standard library's ``operator``."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_operator_dir_is_not_a_package() -> None:
    assert not (REPO / "operator" / "__init__.py").exists()


def test_import_operator_is_stdlib_from_repo_root() -> None:
    code = "import operator, sys; print(operator.__file__); assert operator.add(2, 3) == 5"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    path = out.stdout.strip()
    assert path.endswith("operator.py"), path
    assert not path.startswith(str(REPO / "operator")), path


def test_txntable_imports_from_source_root() -> None:
    import txntable

    assert str(REPO / "operator") in str(txntable.__file__)
