"""Drive the delta-spark server (``tests.deltaspark.server``) from the test process.

One ``DeltaSpark`` is one child process (the delta-spark environment's interpreter, its JVM under
it) in a process group of its own, started once and reused: the session fixture in
``tests/integration/conftest.py`` starts it lazily on first use and stops it at the end of the
session, the benchmark starts its own. ``call`` waits for an answer; ``submit`` returns a future,
so a test can run delta-spark operations while our engine commits. A failed operation raises
``DeltaSparkError`` carrying the Java exception's class and Spark's error condition.

The child's stderr (Spark's log) goes to a file, kept for failures (``log_path``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import tempfile
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any

from tests.deltaspark.env import DeltaSparkEnv, ensure

SERVER = Path(__file__).with_name("server.py")

#: Session settings: small and quiet for two cores (VACUUM lists with
#: ``parallelPartitionDiscovery.parallelism`` tasks, 10,000 by default: minutes of empty tasks; the
#: driver's JIT stops at C1, which costs short jobs less CPU); path-based tables only (in-memory
#: catalog); UTC everywhere, so timestamps compare as instants; Delta's retention check off, so a
#: test can VACUUM with a short retention on purpose. With the JIT stopped at C1 the JVM reserves
#: only 48 MB for compiled code; Spark and Delta fill that within minutes, the JVM then disables
#: its compiler ("CodeCache is full") and runs everything interpreted, several times slower: the
#: reservation is set to what the full tiered JIT gets.
CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.catalogImplementation": "in-memory",
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
    "spark.databricks.delta.retentionDurationCheck.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC -XX:TieredStopAtLevel=1 "
    "-XX:ReservedCodeCacheSize=240m",
    "spark.driver.memory": "1g",
    "spark.sql.streaming.numRecentProgressUpdates": "1000",
}


class DeltaSparkError(Exception):
    """An operation delta-spark refused or failed; ``java_class`` names its exception."""

    def __init__(self, op: str, error: dict[str, Any]) -> None:
        self.op = op
        self.java_class: str = error.get("class") or ""
        self.condition: str | None = error.get("condition")
        self.message: str = error.get("message") or ""
        self.java_causes: list[str] = list(error.get("causes") or [])
        super().__init__(f"{op}: {self.java_class}: {self.message[:1500]}")

    @property
    def short_class(self) -> str:
        return self.java_class.rsplit(".", 1)[-1]

    @property
    def causes(self) -> str:
        """The chain of Java exceptions, outermost first (the task failure a ``Job aborted``
        names is its cause), which a capped message cuts off behind the frames of the first;
        from the message without its stack frames when the server gave no chain."""
        if self.java_causes:
            return " <- ".join(self.java_causes)
        lines = (line.strip() for line in self.message.splitlines())
        kept = [x for x in lines if x and not x.startswith(("at ", "..."))]
        return "\n".join(dict.fromkeys(kept))


class DeltaSpark:
    """A running delta-spark session in a child process."""

    def __init__(
        self,
        env: DeltaSparkEnv | None = None,
        *,
        conf: dict[str, str] | None = None,
        log_dir: Path | None = None,
        start_timeout: float = 600.0,
    ) -> None:
        self.env = ensure(env)
        log_dir = Path(log_dir or tempfile.mkdtemp(prefix="deltaspark-"))
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / "delta-spark.log"
        merged = {**CONF, "spark.jars": ",".join(str(p) for p in self.env.jars())}
        merged["spark.local.dir"] = str(log_dir / "spark-local")
        merged.update(conf or {})
        config = {"conf": merged}
        self._log: IO[bytes] = open(self.log_path, "wb")  # noqa: SIM115  (closed in stop)
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[str, Future[dict[str, Any]]]] = {}
        self._lock = threading.Lock()
        self._ready: Future[dict[str, Any]] = Future()
        env_vars = {**os.environ, "TZ": "UTC", "PYTHONUNBUFFERED": "1"}
        for key in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME", "PYTHONPATH"):
            env_vars.pop(key, None)
        env_vars["PYSPARK_PYTHON"] = str(self.env.python)
        self.proc = subprocess.Popen(
            [str(self.env.python), str(SERVER), json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env_vars,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, name="deltaspark-reader", daemon=True)
        self._reader.start()
        try:
            self.info = self._ready.result(timeout=start_timeout)
        except BaseException:
            self.stop()
            raise

    # -- the pipe ---------------------------------------------------------------------------
    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            msg = json.loads(raw)
            if msg.get("ready"):
                self._ready.set_result(msg)
                continue
            with self._lock:
                op, fut = self._pending.pop(msg["id"])
            if msg.get("ok"):
                fut.set_result(msg)
            else:
                fut.set_exception(DeltaSparkError(op, msg["error"]))
        gone = RuntimeError(f"delta-spark exited ({self.proc.poll()}); log: {self.log_path}")
        if not self._ready.done():
            self._ready.set_exception(gone)
        with self._lock:
            pending, self._pending = self._pending, {}
        for _, fut in pending.values():
            fut.set_exception(gone)

    def submit(self, op: str, **args: Any) -> Future[dict[str, Any]]:
        """Send one request; the future holds the answer or raises ``DeltaSparkError``."""
        rid = next(self._ids)
        fut: Future[dict[str, Any]] = Future()
        with self._lock:
            if self.proc.poll() is not None:
                raise RuntimeError(f"delta-spark is not running; log: {self.log_path}")
            self._pending[rid] = (op, fut)
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps({"id": rid, "op": op, **args}) + "\n").encode())
            self.proc.stdin.flush()
        return fut

    def call(self, op: str, timeout: float = 600.0, **args: Any) -> dict[str, Any]:
        return self.submit(op, **args).result(timeout=timeout)

    # -- conveniences ---------------------------------------------------------------------------
    def sql(self, sql: str) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self.call("sql", sql=sql)["rows"]
        return rows

    def read(self, path: Path | str, version: int | None = None, **args: Any) -> dict[str, Any]:
        """``{"count", "digest"}`` (and ``"rows"`` with ``want_rows=True``) of a table version."""
        return self.call("read", path=str(path), version=version, **args)

    def history(self, path: Path | str) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self.call("history", path=str(path))["rows"]
        return rows

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    # -- lifetime -------------------------------------------------------------------------------
    def stop(self, timeout: float = 60.0) -> None:
        """Stop the session, then the whole process group (the JVM with it)."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(b'{"op": "stop"}\n')
                self.proc.stdin.close()
                self.proc.wait(timeout=timeout)
            except (OSError, subprocess.TimeoutExpired):
                pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._log.close()

    def __enter__(self) -> DeltaSpark:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
