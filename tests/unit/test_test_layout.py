"""The suite's own layout: no test module imports another (issue 32). What two test modules share
lives in a support module (tests/support/ and the other modules not named ``test_*``), so a test
module can be read, moved or deleted on its own, and pytest never collects a test twice."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def imported_modules(tree: ast.Module, package: str) -> list[tuple[int, str]]:
    """Every module ``tree`` imports, with its line, as an absolute name (``package`` resolves
    relative imports); for ``from a import b``, ``a.b`` too when ``a`` itself is not a test
    module (``b`` may be a module)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            found.append((node.lineno, base))
            if not is_test_module(base):
                found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
    return found


def is_test_module(name: str) -> bool:
    return name.rsplit(".", 1)[-1].startswith("test_")


def test_no_module_of_the_suite_imports_a_test_module() -> None:
    """Test modules above all, and the support modules and conftests as well."""
    offences: list[str] = []
    for path in sorted(TESTS.rglob("*.py")):
        relative = path.relative_to(TESTS.parent)
        package = ".".join(relative.parent.parts)
        tree = ast.parse(path.read_text(), filename=str(path))
        for line, module in imported_modules(tree, package):
            if is_test_module(module):
                offences.append(f"{relative}:{line} imports {module}")
    assert not offences, "modules of the suite import test modules:\n" + "\n".join(offences)


def test_the_check_sees_each_form_of_import() -> None:
    source = (
        "import tests.unit.test_a\n"
        "from tests.unit.test_b import x, test_y\n"
        "from tests.unit import test_c\n"
        "from .test_d import y\n"
        "from . import test_e\n"
        "def f():\n"
        "    from tests.unit.test_f import z\n"
        "from tests.support.controller import T0\n"
        "from tests.conftest import REPO\n"
        "from .txn_support import fast\n"
    )
    modules = imported_modules(ast.parse(source), "tests.unit")
    assert [(line, m) for line, m in modules if is_test_module(m)] == [
        (1, "tests.unit.test_a"),
        (2, "tests.unit.test_b"),
        (3, "tests.unit.test_c"),
        (4, "tests.unit.test_d"),
        (5, "tests.unit.test_e"),
        (7, "tests.unit.test_f"),
    ]
