"""Shared fixtures: where the reference tables live, scratch copies of them, and the kmock
emulator every controller test runs against."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

# the asserts moved out of test modules into tests/support (helpers that check as they go)
# still report what they compared, as they did in the test modules pytest rewrites
pytest.register_assert_rewrite("tests.support")

REPO = Path(__file__).resolve().parents[1]

# Ctrl-C as a terminal's foreground job has it, whatever started the suite: a shell's
# background job (``make test &``, ``setsid ... &``) starts with SIGINT ignored, and every
# process a test spawned inherited that, so the tests that send SIGINT to a command (a CLI
# run, a Spark cluster's parent) sent one nobody heard. With a handler installed here, a
# spawned child starts with the default disposition (exec resets handled signals, not ignored
# ones).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# resolved: deltalake reports real paths, and a checkout may reach ../shared through a symlink
TESTDATA = (REPO.parent / "shared" / "testdata" / "delta").resolve()


def reference_tables() -> list[str]:
    """Names of the Spark- and delta-rs-written tables in ../shared/testdata/delta."""
    return sorted(p.name for p in TESTDATA.iterdir() if (p / "_delta_log").is_dir())


@pytest.fixture
def table_copy(tmp_path: Path):
    """Copy a reference table to a writable scratch directory; returns a factory."""

    def copy(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(TESTDATA / name, dest)
        for p in dest.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        dest.chmod(0o755)
        return dest

    return copy


@pytest.fixture
def kmock_options(kmock_options: dict[str, Any]) -> dict[str, Any]:
    """Every ``kmock`` fixture is kmock's emulator whose objects have uids, as on a real API
    server: Kopf keys its memory of an object by uid (``tests.kmock_emulator``)."""
    from tests.kmock_emulator import ApiServerEmulator

    return {**kmock_options, "cls": ApiServerEmulator}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--e2e",
        action="store_true",
        default=False,
        help="run the e2e tier on the real single-node cluster (make e2e; tests/e2e)",
    )


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, which make test runs
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadscope`` by file, with the files that share a process together
    (``tests.xdist_scheduling``)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from tests.xdist_scheduling import SharedProcessScheduling

    return SharedProcessScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from tests.xdist_scheduling import check_items

    check_items(items)


def pytest_runtest_setup(item: pytest.Item) -> None:
    from tests.xdist_scheduling import fail_misplaced

    fail_misplaced(item)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "misplaced_for_xdist(why): set by tests/xdist_scheduling.py on a test that uses a "
        "shared process outside that process's files; it fails at setup",
    )
