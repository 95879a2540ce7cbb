"""delta-spark behind a pipe: one SparkSession answering JSON-lines requests on stdin.

Runs in the delta-spark environment's own interpreter (``tests.deltaspark.env``: PySpark 4.2 and
the delta-spark jars), never in the project's, and imports nothing of the project: the client
(``tests.deltaspark.client``) starts it as a child process and speaks to it line by line.

Protocol: each request is one JSON object ``{"id": N, "op": NAME, ...}``; each answer one JSON
object ``{"id": N, "ok": true, "seconds": S, ...}`` (``S``: the operation's time in the session,
the JVM already up) or ``{"id": N, "ok": false, "error": {"class", "condition",
"message"}}`` (``class`` is the Java exception's class for Spark and Delta errors, so a test can
tell a ``ConcurrentAppendException`` from a ``ProtocolChangedException``). Requests run on a
thread pool, so a test can race delta-spark against itself or against our engine. The first line
is ``{"ready": true, ...}`` once the session is up; ``{"op": "stop"}`` or the end of stdin stops
the streams and the session. The protocol is written on a private copy of the original stdout;
file descriptor 1 is pointed at stderr before Spark starts, so nothing the JVM or a library prints
can corrupt it.

Rows are answered canonically, the way ``tests.deltaspark.canon`` renders Arrow rows: timestamps
as UTC ISO strings, decimals as strings, binary as hex, maps as sorted ``[key, value]`` pairs,
variants as their JSON; ``digest`` is the SHA-1 of the sorted ``json.dumps(row, sort_keys=True)``
lines (for integer and string columns the same digest ``tests.oracle_read`` computes).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import hashlib
import json
import os
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any

_OUT_LOCK = threading.Lock()
_PROTO = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr

from pyspark.sql import SparkSession  # noqa: E402  (after the descriptors are set)
from pyspark.sql import types as st  # noqa: E402
from pyspark.sql.streaming import StreamingQueryListener  # noqa: E402


def emit(obj: dict[str, Any]) -> None:
    line = json.dumps(obj, default=str)
    with _OUT_LOCK:
        _PROTO.write(line + "\n")
        _PROTO.flush()


# -- canonical values -------------------------------------------------------------------------


def canon(value: Any, dtype: st.DataType) -> Any:
    if value is None:
        return None
    if isinstance(dtype, st.StructType):
        return {f.name: canon(value[f.name], f.dataType) for f in dtype.fields}
    if isinstance(dtype, st.ArrayType):
        return [canon(v, dtype.elementType) for v in value]
    if isinstance(dtype, st.MapType):
        pairs = [[canon(k, dtype.keyType), canon(v, dtype.valueType)] for k, v in value.items()]
        return sorted(pairs, key=lambda p: json.dumps(p, sort_keys=True))
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else repr(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    if type(value).__name__ == "VariantVal":
        return value.toJson()
    return value


def rows_of(df: Any) -> list[dict[str, Any]]:
    schema = df.schema
    return [
        {f.name: canon(row[i], f.dataType) for i, f in enumerate(schema.fields)}
        for row in df.collect()
    ]


def digest(rows: list[dict[str, Any]]) -> str:
    lines = sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)
    return hashlib.sha1("\n".join(lines).encode()).hexdigest()


# -- the session and the operations -------------------------------------------------------------


class Server:
    def __init__(self, config: dict[str, Any]) -> None:
        builder = SparkSession.builder.master(config.get("master", "local[2]"))
        for key, value in config["conf"].items():
            builder = builder.config(key, value)
        self.spark = builder.getOrCreate()
        self.spark.sparkContext.setLogLevel("ERROR")
        self.streams: dict[str, Any] = {}
        self.progress: dict[str, list[dict[str, Any]]] = {}
        self.spark.streams.addListener(_Progress(self.progress))

    def table(self, path: str, version: int | None) -> str:
        ref = "delta.`" + path.replace("`", "``") + "`"
        return ref if version is None else f"{ref} VERSION AS OF {int(version)}"

    def op_ping(self) -> dict[str, Any]:
        return {"spark": self.spark.version}

    def op_sql(self, sql: str, rows: bool = True, limit: int = 10_000) -> dict[str, Any]:
        df = self.spark.sql(sql)
        if not rows:
            df.collect()
            return {}
        got = rows_of(df.limit(limit))
        return {"rows": got}

    def op_read(
        self,
        path: str,
        version: int | None = None,
        columns: str = "*",
        where: str | None = None,
        want_rows: bool = False,
    ) -> dict[str, Any]:
        sql = f"SELECT {columns} FROM {self.table(path, version)}"
        if where:
            sql += f" WHERE {where}"
        got = rows_of(self.spark.sql(sql))
        out: dict[str, Any] = {"count": len(got), "digest": digest(got)}
        if want_rows:
            out["rows"] = got
        return out

    def op_query(self, sql: str, want_rows: bool = False) -> dict[str, Any]:
        """``{"count", "digest"}`` of any query's rows (and ``"rows"`` with ``want_rows``)."""
        got = rows_of(self.spark.sql(sql))
        out: dict[str, Any] = {"count": len(got), "digest": digest(got)}
        if want_rows:
            out["rows"] = got
        return out

    def op_read_versions(
        self, path: str, versions: list[int], columns: str = "*", parallel: int = 2
    ) -> dict[str, Any]:
        """``{"versions": {v: {"count", "digest"}}}`` of every version, ``parallel`` at a time
        (time travel costs a handful of small Spark jobs per version, mostly driver time, so two
        at once use both cores)."""

        def one(version: int) -> tuple[int, dict[str, Any]]:
            got = self.op_read(path, version, columns)
            return version, got

        with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
            done = dict(pool.map(one, [int(v) for v in versions]))
        return {"versions": {str(v): done[v] for v in sorted(done)}}

    def op_history(self, path: str) -> dict[str, Any]:
        return {"rows": rows_of(self.spark.sql(f"DESCRIBE HISTORY {self.table(path, None)}"))}

    def op_checkpoint(self, path: str) -> dict[str, Any]:
        jvm = self.spark.sparkContext._jvm
        log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(self.spark._jsparkSession, path)
        log.checkpoint()
        return {
            "version": int(
                log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty()).version()
            )
        }

    def op_log_segment(self, path: str) -> dict[str, Any]:
        """The version delta-spark loads the table at and the checkpoint it starts from (-1:
        none), loaded afresh (its cache of every table's log is dropped first: a cached snapshot
        hides a checkpoint it could no longer read). A checkpoint it cannot read makes it start
        from an older one without a word."""
        jvm = self.spark.sparkContext._jvm
        delta_log = jvm.org.apache.spark.sql.delta.DeltaLog
        delta_log.clearCache()
        log = delta_log.forTable(self.spark._jsparkSession, path)
        snapshot = log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty())
        return {
            "version": int(snapshot.version()),
            "checkpointVersion": int(snapshot.logSegment().checkpointProvider().version()),
        }

    def op_hadoop_read(self, path: str, recursive: bool = True) -> dict[str, Any]:
        """Read every file under ``path`` in full through Hadoop's ``LocalFileSystem``, the
        checksummed file system delta-spark reads ``file:`` tables with: it verifies each file
        against its ``.<name>.crc`` (a missing one is tolerated, a wrong one is a
        ``ChecksumException``), and lists no ``.crc`` file itself. ``{"files", "bytes",
        "errors": {path relative to ``path``: "JavaClass: message"}}``."""
        jvm = self.spark.sparkContext._jvm
        conf = self.spark.sparkContext._jsc.hadoopConfiguration()
        fs = jvm.org.apache.hadoop.fs.FileSystem.getLocal(conf)
        root = fs.makeQualified(jvm.org.apache.hadoop.fs.Path(path))
        prefix = str(root.toUri().getPath()).rstrip("/") + "/"
        sink = jvm.java.io.OutputStream.nullOutputStream()
        for attempt in range(5):
            try:
                paths = []
                listing = fs.listFiles(root, recursive)
                while listing.hasNext():
                    paths.append(listing.next().getPath())
                break
            except Exception:  # a file listed, then gone before its status was read (a
                # writer's temporary file renamed, a cleanup): list again
                if attempt == 4:
                    raise
        files, total, errors = 0, 0, {}
        for file_path in paths:
            name = str(file_path.toUri().getPath())
            name = name[len(prefix) :] if name.startswith(prefix) else name
            files += 1
            try:
                stream = fs.open(file_path)
                try:
                    total += int(stream.transferTo(sink))
                finally:
                    stream.close()
            except Exception as exc:  # py4j's Java error: its class and message
                java = getattr(exc, "java_exception", None)
                errors[name] = (
                    f"{java.getClass().getName()}: {java.getMessage()}"
                    if java is not None
                    else f"{type(exc).__name__}: {exc}"
                )[:1000]
        return {"files": files, "bytes": total, "errors": errors}

    def op_register_gate(self) -> dict[str, Any]:
        """Register the SQL function ``txn_gate(dir, column)`` (``_gate``): a statement that
        calls it blocks, inside its transaction, until the test opens the gate. The column is
        only there to tie the call to the rows of one side of the plan (Spark refuses a Python
        function over literals alone inside a DELETE's join)."""
        self.spark.udf.register("txn_gate", _gate, st.BooleanType())
        return {}

    def op_stream_start(
        self,
        path: str,
        checkpoint: str,
        rows_per_batch: int,
        interval_ms: int,
        select: list[str],
    ) -> dict[str, Any]:
        """A streaming append of ``select`` (expressions over the source's ``value``, which runs
        ``0, 1, 2, ...`` over the batches) into the table."""
        source = (
            self.spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", rows_per_batch)
            .load()
            .selectExpr(*select)
        )
        query = (
            source.writeStream.format("delta")
            .outputMode("append")
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime=f"{int(interval_ms)} milliseconds")
            .start(path)
        )
        self.streams[str(query.id)] = query
        return {"query": str(query.id)}

    def op_stream_read(
        self,
        path: str,
        checkpoint: str,
        columns: list[str] | None = None,
        options: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """A streaming read of the table at ``path`` as a Delta source (``readStream``, reader
        ``options`` such as ``maxFilesPerTrigger``), resumed from ``checkpoint`` (its offsets
        and commits) if that exists, with ``trigger(availableNow=True)``: it processes what the
        table holds beyond the checkpoint, in as many micro-batches as the options make, and
        stops. ``{"batches": [{"batch": id, "rows": [...]}]}``, each batch's rows (``columns``,
        expressions over the source's columns) as ``foreachBatch`` got them; a failed query
        raises its exception."""
        reader = self.spark.readStream.format("delta")
        for key, value in (options or {}).items():
            reader = reader.option(key, value)
        source = reader.load(path)
        if columns:
            source = source.selectExpr(*columns)
        batches: list[dict[str, Any]] = []

        def collect(df: Any, batch_id: int) -> None:
            batches.append({"batch": int(batch_id), "rows": rows_of(df)})

        query = (
            source.writeStream.foreachBatch(collect)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        return {"batches": batches}

    def op_stream_stop(self, query: str) -> dict[str, Any]:
        q = self.streams.pop(query)
        q.stop()
        error = q.exception()
        return {
            "batches": self.progress.get(query, []),
            "error": None if error is None else str(error)[:2000],
        }


def _gate(directory: str, _value: Any) -> bool:
    """Evaluated in a Python worker, row by row: the first call writes ``DIR/reached``; every
    call waits until ``DIR/open`` exists (at most five minutes), then answers true. A statement
    whose read set is fixed before it evaluates the function (Delta starts its transaction
    first) thus holds between its read and its commit for as long as the test wants."""
    import os as _os
    import time as _time

    reached = _os.path.join(directory, "reached")
    if not _os.path.exists(reached):
        with open(reached, "a", encoding="utf-8"):
            pass
    deadline = _time.monotonic() + 300
    while not _os.path.exists(_os.path.join(directory, "open")):
        if _time.monotonic() > deadline:
            raise TimeoutError(f"txn_gate: {directory}/open never appeared")
        _time.sleep(0.02)
    return True


class _Progress(StreamingQueryListener):
    """Keeps, per query, the batches whose progress was reported (reported after the commit)."""

    def __init__(self, sink: dict[str, list[dict[str, Any]]]) -> None:
        self.sink = sink

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        p = event.progress
        if p.numInputRows <= 0:
            return
        # the rate source's offset is the number of rows it produced so far: this batch carried
        # the values end - rows .. end - 1 (its start offset is not always JSON: json.loads
        # failed on an early batch's); a progress not understood is kept as an error
        entry: dict[str, Any] = {"batch": p.batchId, "rows": p.numInputRows}
        try:
            end = int(json.loads(p.sources[0].endOffset)["offset"])
            entry.update(start=end - p.numInputRows, end=end)
        except Exception as exc:
            entry["error"] = f"{type(exc).__name__}: {p.sources[0].endOffset!r}"
        self.sink.setdefault(str(p.id), []).append(entry)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass


def describe_error(exc: BaseException) -> dict[str, Any]:
    cls = type(exc).__name__
    condition = None
    origin = getattr(exc, "_origin", None) or getattr(exc, "java_exception", None)
    if origin is not None:
        with contextlib.suppress(Exception):  # the gateway may be gone while stopping
            cls = str(origin.getClass().getName())
    try:
        condition = exc.getCondition()  # type: ignore[attr-defined]
    except Exception:
        condition = None
    message = str(exc).strip()
    if not message:
        message = "".join(traceback.format_exception(exc))[-2000:]
    return {
        "class": cls,
        "condition": condition,
        "message": message[:4000],
        "causes": _java_causes(origin),
    }


def _java_causes(origin: Any) -> list[str]:
    """The Java exception and its causes, each ``Class: message`` (first line), outermost
    first: a task's failure is the cause of a ``Job aborted``, far below the first frames."""
    causes: list[str] = []
    with contextlib.suppress(Exception):  # the gateway may be gone while stopping
        while origin is not None and len(causes) < 12:
            text = str(origin.getMessage() or "").strip().split("\n", 1)[0]
            causes.append(f"{origin.getClass().getName()}: {text[:500]}")
            nxt = origin.getCause()
            origin = None if nxt is None or nxt.equals(origin) else nxt
    return causes


def serve(server: Server, request: dict[str, Any]) -> None:
    rid = request.pop("id")
    op = request.pop("op")
    try:
        started = time.perf_counter()
        result = getattr(server, f"op_{op}")(**request)
        seconds = round(time.perf_counter() - started, 4)
        emit({"id": rid, "ok": True, "seconds": seconds, **result})
    except BaseException as exc:
        emit({"id": rid, "ok": False, "error": describe_error(exc)})


def main() -> int:
    config = json.loads(sys.argv[1])
    server = Server(config)
    emit({"ready": True, "spark": server.spark.version})
    pool = ThreadPoolExecutor(max_workers=int(config.get("threads", 8)))
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if request.get("op") == "stop":
            break
        pool.submit(serve, server, request)
    # the client is done (or gone): cancel what still runs rather than wait for it
    server.spark.sparkContext.cancelAllJobs()
    for query in list(server.streams.values()):
        with contextlib.suppress(Exception):
            query.stop()
    pool.shutdown(wait=False, cancel_futures=True)
    server.spark.stop()
    _PROTO.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
