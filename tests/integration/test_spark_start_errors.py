"""A Spark session that cannot start ends the command with one line that says why, and only that.

The gateway JVM used to print on the command's stderr before our ``error:`` line: log4j's ERROR
with a Java stack trace (300 lines for a ``k8s://`` master nobody serves), or the launcher's
``java: No such file or directory``, while our own line said only "Java gateway process exited
before sending its port number" when the JVM never came up. Now what the JVM says while the
session starts is held back (``maintenance.spark_gateway``): a failed start prints only our line,
with the JVM's reason in it; a start that works still shows Spark's start-up warnings.

Real commands in child processes, real PySpark and Java; a ``k8s://`` master on a local port
nothing listens on (refused at once); a ``JAVA_HOME`` with no Java in it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from txntable.engine.table import Table

pytestmark = pytest.mark.integration


def small_files(path: Path) -> str:
    table = Table.create(str(path), pa.schema([("id", pa.int64())]))
    for i in range(4):
        table.append(pa.table({"id": [i]}))
    return str(path)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "txntable.cli.main", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=False,
        timeout=600,
    )


def test_no_java_is_one_line_naming_java(tmp_path: Path) -> None:
    uri = small_files(tmp_path / "t")
    missing = tmp_path / "no-java"
    done = run(["optimize", uri, "--master", "local[1]"], JAVA_HOME=str(missing))
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        "error: SparkStartError: Spark could not start (master 'local[1]'): the Spark JVM "
        f"exited: {missing}/bin/java: No such file or directory"
    ]
    assert Table.open(uri).snapshot().version == 4  # nothing changed


def test_a_master_that_refuses_is_one_line_with_its_cause(tmp_path: Path) -> None:
    """The JVM comes up and SparkContext fails: no log4j ERROR, no stack trace, and the
    deepest cause (the refused connection) in the line; the result line says the same."""
    uri = small_files(tmp_path / "t")
    master = f"k8s://https://127.0.0.1:{closed_port()}"
    done = run(["optimize", uri, "--master", master, "--json"])
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: SparkStartError: Spark could not start (master {master!r}): ")
    assert "KubernetesClientException" in line and "Connection refused" in line
    result = json.loads(done.stdout.splitlines()[-1])
    assert f"error: {result['error']}" == line
    assert Table.open(uri).snapshot().version == 4


def test_a_start_that_works_still_shows_sparks_warnings(tmp_path: Path) -> None:
    uri = small_files(tmp_path / "t")
    done = run(["optimize", uri, "--master", "local[1]"])
    assert done.returncode == 0, done.stderr
    assert "Using Spark's default log4j profile" in done.stderr  # released, not dropped
    assert Table.open(uri).snapshot().version == 5
