"""Integration fixtures shared across files: one local SparkSession for the whole test session,
one delta-spark process and one Spark standalone cluster.

Starting a JVM takes about ten seconds, so every Spark test uses this one session (master
``local[2]``, UI off, two shuffle partitions) and it is stopped once at the end. delta-spark (the
reference implementation, PySpark 4.2 in its own environment: ``tests/deltaspark``) is one child
process for the whole session too, started on the first test that asks for it and stopped, JVM
and all, at the end. The cluster (master and two workers, ``spark_cluster.py``) starts only when
a test asks for it; its jobs run as processes of their own, as drivers do.

The S3 tests' moto bucket (``endpoint``) and the Azure tests' Azurite container (``blob_url``)
are module fixtures of tests/support, made visible here to every file that uses them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.deltaspark.client import DeltaSpark
from tests.support.azurite import blob_url  # noqa: F401 - a fixture of the Azure tests
from tests.support.s3_moto import endpoint  # noqa: F401 - a fixture of the S3 tests


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("txntable-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def delta_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeltaSpark]:
    """The session's delta-spark (``tests.deltaspark.client.DeltaSpark``); its Spark log is in
    the session's temporary directory."""
    server = DeltaSpark(log_dir=tmp_path_factory.mktemp("deltaspark"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Spark standalone master and two workers (1 core, 1 GiB each) on 127.0.0.1, shared by
    the session (tests/integration/spark_cluster.py). Its logs stay in the session's temporary
    directory; at the end every daemon, executor and Python worker must be gone."""
    from tests.integration import spark_cluster as cluster_support

    cluster = cluster_support.start(tmp_path_factory.mktemp("spark-cluster"), workers=2)
    try:
        yield cluster
    finally:
        survivors = cluster_support.stop(cluster)
        assert not survivors, f"Spark processes survived the cluster's stop: {survivors}"
