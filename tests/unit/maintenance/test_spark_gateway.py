"""``maintenance.spark_gateway`` without a JVM: the holding of a pipe's lines, and the one line
a failed start is summed up in (from what real JVMs printed; tests/integration/
test_spark_start_errors.py starts real ones)."""

from __future__ import annotations

import os

from txntable.maintenance.errors import SparkJvmExitedError
from txntable.maintenance.spark_gateway import GatewayOutput, start_reason

SPARK_NOISE = [
    "WARNING: Using incubator modules: jdk.incubator.vector",
    "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties",
    "26/11/27 10:49:04 WARN Utils: Your hostname, vm, resolves to a loopback address",
]


def pipes() -> tuple[GatewayOutput, int, int]:
    """An output pumping a pipe (the JVM's end returned) into another (its far end returned)."""
    jvm_read, jvm_write = os.pipe()
    out_read, out_write = os.pipe()
    return GatewayOutput(jvm_read, out_write), jvm_write, out_read


def written(out_read: int) -> bytes:
    with os.fdopen(out_read, "rb") as stream:  # the pump closes its end at the JVM's EOF
        return stream.read()


def test_held_lines_are_written_on_release_before_the_next() -> None:
    output, jvm, out = pipes()
    output.hold()
    os.write(jvm, b"starting\nstill starting\n")
    output.release()
    os.write(jvm, b"running\npartial line")
    os.close(jvm)
    output.settle()
    assert written(out) == b"starting\nstill starting\nrunning\npartial line\n"


def test_held_lines_are_dropped_after_a_failed_start_and_what_follows_too() -> None:
    output, jvm, out = pipes()
    output.hold()
    os.write(jvm, b"ERROR SparkContext: boom\n\tat a.b(C.java:1)\n")
    os.close(jvm)
    output.settle()
    assert output.drop() == ["ERROR SparkContext: boom", "\tat a.b(C.java:1)"]
    assert written(out) == b""


def test_lines_are_forwarded_when_nothing_starts() -> None:
    output, jvm, out = pipes()
    os.write(jvm, b"a task failed\n")
    os.close(jvm)
    output.settle()
    assert written(out) == b"a task failed\n"


def test_a_jvm_that_exits_at_start_is_summed_up_by_the_line_that_says_why() -> None:
    cause = RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its")
    script = "/venv/lib/python3.11/site-packages/pyspark/bin/spark-class"
    no_java = [
        f"{script}: line 71: /nonexistent/bin/java: No such file or directory",
        f"{script}: line 97: CMD: bad array subscript",
    ]
    assert (
        start_reason(SparkJvmExitedError(cause, no_java))
        == "the Spark JVM exited: /nonexistent/bin/java: No such file or directory"
    )
    assert (
        start_reason(SparkJvmExitedError(cause, ["JAVA_HOME is not set"]))
        == "the Spark JVM exited: JAVA_HOME is not set"
    )
    uncaught = [
        *SPARK_NOISE,
        'Exception in thread "main" org.apache.spark.SparkException: Cannot load main class',
        "\tat org.apache.spark.deploy.SparkSubmit.doSubmit(SparkSubmit.scala:1)",
    ]
    assert (
        start_reason(SparkJvmExitedError(cause, uncaught))
        == "the Spark JVM exited: SparkException: Cannot load main class"
    )
    # nothing but noise: PySpark's own reason
    assert "JAVA_GATEWAY_EXITED" in start_reason(SparkJvmExitedError(cause, SPARK_NOISE))


def test_a_context_that_fails_is_summed_up_with_its_deepest_cause() -> None:
    trace = (
        "An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.\n"
        ": io.fabric8.kubernetes.client.KubernetesClientException: An error has occurred.\n"
        "\tat io.fabric8.kubernetes.client.KubernetesClientException.launderThrowable(K.java:1)\n"
        "Caused by: java.io.IOException: Connection refused: /127.0.0.1:1\n"
        "\tat io.fabric8.Something(S.java:2)\n"
        "Caused by: java.net.ConnectException: Connection refused\n"
    )
    assert start_reason(RuntimeError(trace)) == (
        "KubernetesClientException: An error has occurred. "
        "(caused by ConnectException: Connection refused)"
    )
    single = (
        "An error occurred\n: org.apache.spark.SparkException: Asked to run locally with 0 threads"
    )
    assert (
        start_reason(RuntimeError(single)) == "SparkException: Asked to run locally with 0 threads"
    )
