"""Spark's failures as one line, the master check before Spark starts, and how jobs end.

The texts are what PySpark 4.3 raised here (a task whose Python raised, a master URL Spark could
not parse, a context stopped after the master never answered), cut to their telling lines."""

from __future__ import annotations

import json
import socket

import pytest

from txntable.engine.errors import (
    InvalidArgumentError,
    StorageError,
    UnsupportedReaderFeatureError,
)
from txntable.jobs import outcome
from txntable.jobs.signals import Terminated
from txntable.maintenance.errors import InvalidPolicyError, SparkJobError, SparkStartError
from txntable.maintenance.spark_session import check_master_reachable
from txntable.maintenance.spark_support import spark_error_line

TASK_FAILED = """An exception was thrown from the Python worker:
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip/pyspark/worker.py", line 4327, in invoke_udf
    run_process()
  File "/venv/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip/pyspark/util.py", line 158, in wrapper
    return f(*args, **kwargs)
  File "/work/operator/txntable/maintenance/replay_spark.py", line 150, in read_pieces
    rows, found = read_piece(storage, piece)
txntable.engine.errors.CorruptLogError: checkpoint _delta_log/x.parquet is not readable Parquet: bad magic
"""  # noqa: E501 - a real traceback

#: Spark 3's form: the stage failure, the JVM trace, then the cause with the Python traceback
STAGE_FAILED = """An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 1.0 failed 4 times, most recent failure: Lost task 0.3 in stage 1.0 (TID 7) (127.0.0.1 executor 1): org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/opt/spark/python/lib/pyspark.zip/pyspark/serializers.py", line 471, in loads
    return cloudpickle.loads(obj, encoding=encoding)
ModuleNotFoundError: No module named 'txntable'

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:572)
\tat org.apache.spark.scheduler.Task.run(Task.scala:141)
Driver stacktrace:
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2856)
Caused by: org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/opt/spark/python/lib/pyspark.zip/pyspark/serializers.py", line 471, in loads
    return cloudpickle.loads(obj, encoding=encoding)
ModuleNotFoundError: No module named 'txntable'

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:572)
"""  # noqa: E501 - a real trace

BAD_URL = """An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.
: org.apache.spark.SparkException: Could not parse Master URL: 'bogus://x'
\tat org.apache.spark.SparkContext$.org$apache$spark$SparkContext$$createTaskScheduler(SparkContext.scala:3391)
\tat org.apache.spark.SparkContext.<init>(SparkContext.scala:603)
"""  # noqa: E501 - a real trace

STOPPED = """An error occurred while calling o31.collect.
: java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext.
This stopped SparkContext was created at:
\tat org.apache.spark.SparkContext.assertNotStopped(SparkContext.scala:120)
"""


class Py4JJavaError(Exception):  # the same name as Py4J's, without a JVM
    pass


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            TASK_FAILED,
            "CorruptLogError: checkpoint _delta_log/x.parquet is not readable Parquet: bad magic",
        ),
        (STAGE_FAILED, "ModuleNotFoundError: No module named 'txntable'"),
        (BAD_URL, "SparkException: Could not parse Master URL: 'bogus://x'"),
        (STOPPED, "IllegalStateException: Cannot call methods on a stopped SparkContext."),
        ("something odd\nhappened", "Py4JJavaError: something odd"),
        ("", "Py4JJavaError"),
    ],
)
def test_a_spark_failure_is_one_line(text: str, line: str) -> None:
    assert spark_error_line(Py4JJavaError(text)) == line


def test_the_line_is_bounded() -> None:
    assert len(spark_error_line(Py4JJavaError("x" * 5000))) == 1000


def _listening() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    return server


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_standalone_master_nobody_answers_at_fails_at_once() -> None:
    """Spark retries for a minute, then says "Cannot call methods on a stopped SparkContext"."""
    dead = f"spark://127.0.0.1:{_closed_port()}"
    with pytest.raises(SparkStartError, match=f"cannot reach the Spark master {dead} ") as dead_:
        check_master_reachable(dead, timeout=5)
    assert not dead_.value.bad_argument  # a failed start (exit 1), not bad usage
    with _listening() as server:
        alive = f"127.0.0.1:{server.getsockname()[1]}"
        check_master_reachable(f"spark://{alive}")
        check_master_reachable(f"spark://127.0.0.1:{_closed_port()},{alive}")  # HA: one is enough
    for bad in ("spark://nohost", "spark://:7077", "spark://h:port"):
        with pytest.raises(SparkStartError, match="bad Spark master URL") as refused:
            check_master_reachable(bad)
        assert refused.value.bad_argument
    for other in ("local[2]", "k8s://https://10.0.0.1:443", "yarn", ""):
        check_master_reachable(other)  # left to Spark


@pytest.mark.parametrize(
    ("exc", "started", "status"),
    [
        (InvalidArgumentError("--part-size must be positive"), False, 2),
        (InvalidPolicyError("--target-size: bad"), False, 2),
        (StorageError("S3 error while listing"), False, 2),  # before work began: refused
        (StorageError("S3 error while writing"), True, 1),  # after: failed
        (UnsupportedReaderFeatureError("reader feature x"), True, 2),  # refused whenever found
        (SparkStartError("cannot reach the Spark master"), False, 1),
        (SparkStartError("Could not parse Master URL", bad_argument=True), False, 2),
        (SparkJobError("OPTIMIZE's Spark job failed"), False, 1),
        (KeyboardInterrupt(), False, 130),
        (Terminated(), True, 143),
        (RuntimeError("unexpected"), False, 1),
    ],
)
def test_exit_status(exc: BaseException, started: bool, status: int) -> None:
    assert outcome.exit_status(exc, started=started) == status


def test_a_failure_is_one_result_line_and_stderr_ends_with_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    error = Py4JJavaError(STAGE_FAILED)
    assert outcome.fail({"table": "s3://b/t", "runId": "r"}, error) == 1
    out, err = capsys.readouterr()
    (line,) = out.splitlines()
    assert json.loads(line) == {
        "table": "s3://b/t",
        "runId": "r",
        "error": "ModuleNotFoundError: No module named 'txntable'",
    }
    assert "Traceback" in err  # an unexpected error keeps its Python traceback on stderr
    assert err.rstrip().splitlines()[-1] == "error: ModuleNotFoundError: No module named 'txntable'"
    assert outcome.fail({}, StorageError("no\nnewlines")) == 2
    out, err = capsys.readouterr()
    assert json.loads(out)["error"] == "no newlines" and err == "error: no newlines\n"
    assert json.loads(out)["errorType"] == "BadInput"  # a refusal says what kind (jobs)


def test_an_interrupt_is_one_result_line_without_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """SIGTERM (a stopped local run, a pod ending) and Ctrl-C end in the result line too."""
    assert outcome.fail({"table": "t"}, Terminated()) == 143
    out, err = capsys.readouterr()
    assert json.loads(out) == {"table": "t", "error": "terminated"}
    assert err == "error: terminated\n"
    assert outcome.fail({"table": "t"}, KeyboardInterrupt()) == 130
    out, err = capsys.readouterr()
    assert json.loads(out)["error"] == "interrupted" and err == "error: interrupted\n"
