"""OPTIMIZE benchmark: compacting a table of many small files, ours against deltalake and
against the limit of reading and writing the same bytes with pyarrow alone.

One run, side by side, every contender on its own fresh copy of the same table (data files
hard-linked from one generated original, so copies are instant and share the page cache, which
is warmed once before timing). Contenders:

* ``ours (Spark local[2])``: ``optimize`` with the Spark executor, timed with and without the
  SparkSession (JVM) start;
* ``ours (Arrow, 2 threads)``: the same orchestration with the in-process executor;
* ``deltalake compact()``: ``DeltaTable.optimize.compact`` with the same target size;
* ``pyarrow limit``: read every input file and write the same number of output files (two
  threads, no log, no statistics), the floor any implementation on pyarrow can reach.

The generated table (``FULL``: 4,000 files of ~280 KB, about 1.1 GB, 4 partitions) is written
once with pyarrow and described by one commit through our engine; it is cached in ``bench/out/``.
Its columns are random (uniform doubles, random ids and names), so codecs barely differ on it.

Output bytes (issue 14): a second, realistic table (``SIZES``: 300 deltalake appends of 2,500 rows,
~57 MB: sequential and Zipf-distributed ids, prices, random doubles, quantities, low-cardinality
country/status strings, e-mails, UUID-like session strings, URLs, sorted timestamps, 4 day
partitions) is compacted by deltalake and by ours with each Parquet setting in ``VARIANTS``, each on
its own copy; the table reports output bytes, the ratio to deltalake's and the time.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import random
import shutil
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

NAME = "optimize"
OUT_DIR = Path(__file__).resolve().parent / "out"
TARGET = 128 * 1024 * 1024
_REVISION = 1


@dataclass(frozen=True)
class Spec:
    files: int
    rows_per_file: int
    partitions: int = 4

    @property
    def key(self) -> str:
        return f"optimize-r{_REVISION}-{self.files}x{self.rows_per_file}-p{self.partitions}"


FULL = Spec(files=4000, rows_per_file=6500)
QUICK = Spec(files=200, rows_per_file=3000)
TINY = Spec(files=24, rows_per_file=200)


def _batch(start: int, n: int) -> pa.Table:
    """``n`` rows of random data (vectorised: generating a gigabyte row by row takes minutes)."""

    def rand() -> pa.Array:
        return pc.random(n)

    def ints(scale: float) -> pa.Array:
        return pc.cast(pc.floor(pc.multiply(rand(), scale)), pa.int64())

    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "value": rand(),
            "qty": pc.cast(ints(1_000_000), pa.int32()),
            "name": pc.binary_join_element_wise("name-", pc.cast(ints(1e12), pa.string()), ""),
            "ts": pc.cast(pc.add(ints(2**36), 1_600_000_000_000_000), pa.timestamp("us", tz="UTC")),
        }
    )


def generate(spec: Spec, out_dir: Path = OUT_DIR) -> Path:
    """The pristine table for ``spec`` (built once, then reused)."""
    from txntable.engine.model.actions import AddFile, Metadata, Protocol, serialize_commit
    from txntable.engine.model.stats import stats_from_parquet
    from txntable.engine.storage.paths import encode_path

    final = out_dir / spec.key
    if (final / ".complete").exists():
        return final
    tmp = out_dir / f"{spec.key}.tmp-{uuid.uuid4().hex[:8]}"
    (tmp / "_delta_log").mkdir(parents=True)
    adds = []
    for i in range(spec.files):
        part = f"part{i % spec.partitions}"
        rel = f"p={part}/part-{i:05d}-{uuid.uuid4()}.c000.snappy.parquet"
        (tmp / rel).parent.mkdir(exist_ok=True)
        data = _batch(i * spec.rows_per_file, spec.rows_per_file)
        pq.write_table(data, tmp / rel, compression="snappy")
        meta = pq.read_metadata(tmp / rel)
        adds.append(
            AddFile(
                path=encode_path(rel),
                partition_values={"p": part},
                size=(tmp / rel).stat().st_size,
                modification_time=int(time.time() * 1000),
                data_change=True,
                stats=stats_from_parquet(meta),
            )
        )
    schema = (
        '{"type":"struct","fields":['
        '{"name":"id","type":"long","nullable":true,"metadata":{}},'
        '{"name":"value","type":"double","nullable":true,"metadata":{}},'
        '{"name":"qty","type":"integer","nullable":true,"metadata":{}},'
        '{"name":"name","type":"string","nullable":true,"metadata":{}},'
        '{"name":"ts","type":"timestamp","nullable":true,"metadata":{}},'
        '{"name":"p","type":"string","nullable":true,"metadata":{}}]}'
    )
    metadata = Metadata(
        id=str(uuid.uuid4()),
        schema_string=schema,
        partition_columns=["p"],
        created_time=int(time.time() * 1000),
    )
    commit = serialize_commit([Protocol(1, 2), metadata, *adds])
    (tmp / "_delta_log" / f"{0:020d}.json").write_bytes(commit)
    (tmp / ".complete").touch()
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    return final


def fresh_copy(pristine: Path, dest: Path) -> Path:
    """A writable copy: the log copied, data files hard-linked (OPTIMIZE never modifies them)."""
    if dest.exists():
        shutil.rmtree(dest)
    for src in pristine.rglob("*"):
        if src.name == ".complete" or src.is_dir():
            continue
        target = dest / src.relative_to(pristine)
        target.parent.mkdir(parents=True, exist_ok=True)
        if "_delta_log" in src.parts:
            shutil.copyfile(src, target)
        else:
            os.link(src, target)
    return dest


def warm(pristine: Path) -> int:
    total = 0
    for f in pristine.rglob("*.parquet"):
        total += len(f.read_bytes())
    return total


def _rows(path: Path) -> int:
    from deltalake import DeltaTable

    actions = pa.table(DeltaTable(str(path)).get_add_actions())
    return int(pc.sum(actions.column("num_records")).as_py() or 0)


def _ours(path: Path, executor: Any, options: Any = None) -> dict[str, Any]:
    from txntable.api.optimize_options import OptimizeOptions
    from txntable.engine.table import Table
    from txntable.maintenance.optimize import optimize

    policy = options or OptimizeOptions(target_file_size=TARGET)
    t0 = time.perf_counter()
    result = optimize(Table.open(str(path)), policy, executor)
    seconds = time.perf_counter() - t0
    if result.error:
        raise RuntimeError(result.error)
    return {
        "seconds": seconds,
        "files_after": result.num_files_added,
        "bytes_added": result.num_bytes_added,
    }


def _deltalake(path: Path) -> dict[str, Any]:
    from deltalake import DeltaTable

    t0 = time.perf_counter()
    metrics = DeltaTable(str(path)).optimize.compact(target_size=TARGET)
    seconds = time.perf_counter() - t0
    added = metrics.get("filesAdded") or {}
    if isinstance(added, str):
        added = json.loads(added)
    return {
        "seconds": seconds,
        "files_after": metrics.get("numFilesAdded"),
        "bytes_added": added.get("totalSize"),
    }


def _pyarrow_limit(path: Path, out: Path, same_settings: bool = False) -> dict[str, Any]:
    """Read every file of a partition and write it as target-sized files, two threads: with
    pyarrow's defaults (Snappy, a dictionary for every column), or with ``same_settings`` the
    Parquet settings our rewrite writes with (``ParquetWriteOptions()``: zstd 1, dictionary by
    sampled cardinality), which makes it the floor of our own work."""
    from txntable.engine.write.parquet_options import ParquetWriteOptions

    options = ParquetWriteOptions()
    groups: dict[str, list[Path]] = {}
    for f in sorted(path.rglob("*.parquet")):
        groups.setdefault(f.parent.name, []).append(f)
    jobs: list[tuple[list[Path], Path]] = []
    for name, files in groups.items():
        size = 0
        current: list[Path] = []
        for f in files:
            if current and size + f.stat().st_size > TARGET:
                jobs.append((current, out / f"{name}-{len(jobs)}.parquet"))
                current, size = [], 0
            current.append(f)
            size += f.stat().st_size
        if current:
            jobs.append((current, out / f"{name}-{len(jobs)}.parquet"))
    out.mkdir(parents=True, exist_ok=True)

    def rewrite(job: tuple[list[Path], Path]) -> int:
        data = pa.concat_tables([pq.ParquetFile(f).read() for f in job[0]])
        if same_settings:
            options.write(data, job[1])
        else:
            pq.write_table(data, job[1], compression="snappy")
        return job[1].stat().st_size

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=2) as pool:
        sizes = list(pool.map(rewrite, jobs))
    return {
        "seconds": time.perf_counter() - t0,
        "files_after": len(jobs),
        "bytes_added": sum(sizes),
    }


def _timed(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``fn``'s figures and the peak RSS of this process tree while it ran (a Spark
    contender's JVM and Python workers are children of this process)."""
    from bench.process import PeakRss

    try:
        with PeakRss(os.getpid()) as memory:
            out = fn()
    except Exception as exc:  # a failing contender is reported, not fatal
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {**out, **memory.figures()}


def run(quick: bool) -> dict[str, Any]:
    result = run_spec(QUICK if quick else FULL)
    result["compression"] = run_compression(SIZES_QUICK if quick else SIZES)
    return result


@dataclass(frozen=True)
class SizesSpec:
    appends: int
    rows_per_append: int
    days: int = 4

    @property
    def key(self) -> str:
        return f"optimize-sizes-r1-{self.appends}x{self.rows_per_append}-d{self.days}"


SIZES = SizesSpec(appends=300, rows_per_append=2500)
SIZES_QUICK = SizesSpec(appends=40, rows_per_append=1000)

_COUNTRIES = [
    *("US", "DE", "FR", "GB", "JP", "BR", "IN", "CN", "CA", "AU"),
    *("ES", "IT", "NL", "SE", "PL", "MX", "KR", "ZA", "AR", "NO"),
]
_STATUSES = ["ok", "pending", "failed", "refunded", "cancelled"]


def _realistic_batch(rng: random.Random, start: int, n: int, day: str) -> pa.Table:
    """``n`` rows shaped like an order log (see the module docstring)."""
    user = [int(rng.paretovariate(0.8)) % 200_000 for _ in range(n)]
    base = int(dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC).timestamp() * 1e6)
    ts = sorted(base + rng.randrange(86_400_000_000) for _ in range(n))
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "user_id": pa.array(user, pa.int64()),
            "amount": [round(rng.lognormvariate(3, 1), 2) for _ in range(n)],
            "score": [rng.random() for _ in range(n)],
            "qty": pa.array([rng.randrange(1, 20) for _ in range(n)], pa.int32()),
            "country": [_COUNTRIES[min(int(rng.expovariate(0.3)), 19)] for _ in range(n)],
            "status": rng.choices(_STATUSES, weights=[80, 10, 5, 3, 2], k=n),
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "email": [f"user{u}@example.com" for u in user],
            "session": [f"{rng.getrandbits(128):032x}" for _ in range(n)],
            "url": [f"https://shop.example.com/p/{rng.randrange(50_000)}" for _ in range(n)],
            "day": [day] * n,
        }
    )


def generate_realistic(spec: SizesSpec, out_dir: Path = OUT_DIR) -> Path:
    """The realistic table for ``spec``, written by deltalake appends (built once, then reused)."""
    from deltalake import write_deltalake

    final = out_dir / spec.key
    if (final / ".complete").exists():
        return final
    tmp = out_dir / f"{spec.key}.tmp-{uuid.uuid4().hex[:8]}"
    rng = random.Random(7)
    for i in range(spec.appends):
        day = f"2026-01-{1 + i % spec.days:02d}"
        data = _realistic_batch(rng, i * spec.rows_per_append, spec.rows_per_append, day)
        write_deltalake(str(tmp), data, mode="append", partition_by=["day"])
    (tmp / ".complete").touch()
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    return final


#: Our Parquet settings compared on the realistic table: (label, codec, level, rows, dictionary)
VARIANTS: list[tuple[str, str, int | None, int | None, str | None]] = [
    ("snappy, dictionary on (before issue 14)", "snappy", None, None, "on"),
    ("snappy, auto dictionary", "snappy", None, None, "auto"),
    ("lz4_raw, auto dictionary", "lz4_raw", None, None, "auto"),
    ("zstd 1, dictionary on", "zstd", 1, None, "on"),
    ("zstd 1, auto dictionary (default)", "zstd", 1, None, "auto"),
    ("zstd 1, auto, 131,072-row row groups", "zstd", 1, 131_072, "auto"),
    ("zstd 3, auto dictionary", "zstd", 3, None, "auto"),
    ("zstd 6, auto dictionary", "zstd", 6, None, "auto"),
    ("zstd 9, auto dictionary", "zstd", 9, None, "auto"),
    ("gzip 6, auto dictionary", "gzip", 6, None, "auto"),
]


def run_compression(spec: SizesSpec, out_dir: Path = OUT_DIR) -> dict[str, Any]:
    """Output bytes and time of deltalake's compact and of ours with every ``VARIANTS`` entry,
    each on its own copy of the realistic table, in one run."""
    from txntable.api.optimize_options import OptimizeOptions
    from txntable.maintenance.executor_arrow import ArrowExecutor

    pristine = generate_realistic(spec, out_dir)
    input_bytes = sum(
        f.stat().st_size for f in pristine.rglob("*.parquet") if "_delta_log" not in f.parts
    )
    warm(pristine)
    rows_in = _rows(pristine)
    work = out_dir / f"{spec.key}.work"
    results: dict[str, Any] = {}
    copy = fresh_copy(pristine, work / "deltalake")
    results["deltalake"] = _timed(lambda: _deltalake(copy))
    results["deltalake"]["rows_ok"] = _rows(copy) == rows_in
    shutil.rmtree(copy)
    for label, codec, level, rows, dictionary in VARIANTS:
        settings = OptimizeOptions(
            target_file_size=TARGET,
            compression=codec,
            compression_level=level,
            row_group_rows=rows,
            dictionary=dictionary,
        )
        copy = fresh_copy(pristine, work / "ours")
        results[label] = _timed(partial(_ours, copy, ArrowExecutor(workers=2), settings))
        results[label]["rows_ok"] = _rows(copy) == rows_in
        shutil.rmtree(copy)
    shutil.rmtree(work, ignore_errors=True)
    return {
        "spec": {"appends": spec.appends, "rows_per_append": spec.rows_per_append},
        "input_files": sum(1 for _ in pristine.rglob("*.parquet") if "_delta_log" not in _.parts),
        "input_bytes": input_bytes,
        "rows": rows_in,
        "load_average": [round(x, 1) for x in os.getloadavg()],
        "results": results,
    }


def render_compression(result: dict[str, Any]) -> str:
    r = result["results"]
    base = r["deltalake"].get("bytes_added")
    base_s = r["deltalake"].get("seconds")
    lines = [
        f"Output bytes on a realistic table: {result['input_files']} files written by "
        f"{result['spec']['appends']} deltalake appends, {result['input_bytes'] / 1e6:.1f} MB, "
        f"{result['rows']:,} rows in 4 partitions, compacted to one file per partition. Ratios "
        "are ours / deltalake (lower is better); ours runs the Arrow executor, 2 threads.",
        "",
        "| writer | output MB | vs deltalake bytes | seconds | vs deltalake time | rows |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for label, res in r.items():
        name = "deltalake optimize.compact()" if label == "deltalake" else f"ours, {label}"
        size, secs = res.get("bytes_added"), res.get("seconds")
        if size is None or secs is None:
            lines.append(f"| {name} | failed | | | | |")
            continue
        ratio = f"{size / base:.2f}x" if base else "n/a"
        t_ratio = f"{secs / base_s:.2f}x" if base_s else "n/a"
        ok = "same" if res.get("rows_ok") else "DIFFER"
        lines.append(f"| {name} | {size / 1e6:.1f} | {ratio} | {secs:.2f} | {t_ratio} | {ok} |")
    lines += [
        "",
        "Load average (1/5/15 min) when it ended: "
        + " / ".join(str(x) for x in result["load_average"])
        + ".",
    ]
    return "\n".join(lines)


def run_spec(spec: Spec, out_dir: Path = OUT_DIR, spark: Any | None = None) -> dict[str, Any]:
    """Measure every contender on ``spec``; ``spark``: an already started session to use (then
    the start-up time is only the Python workers' warm-up)."""
    from txntable.maintenance.executor_arrow import ArrowExecutor
    from txntable.maintenance.executor_spark import SparkExecutor

    pristine = generate(spec, out_dir)
    input_bytes = warm(pristine)
    work = out_dir / f"{spec.key}.work"
    rows_in = _rows(pristine)
    results: dict[str, Any] = {}

    copy = fresh_copy(pristine, work / "deltalake")
    results["deltalake"] = _timed(lambda: _deltalake(copy))
    results["deltalake"]["rows_ok"] = _rows(copy) == rows_in
    shutil.rmtree(copy)

    copy = fresh_copy(pristine, work / "pyarrow")
    results["pyarrow"] = _timed(lambda: _pyarrow_limit(copy, work / "pyarrow-out"))
    shutil.rmtree(copy)
    shutil.rmtree(work / "pyarrow-out", ignore_errors=True)

    copy = fresh_copy(pristine, work / "pyarrow-same")
    results["pyarrow_same"] = _timed(lambda: _pyarrow_limit(copy, work / "pyarrow-same-out", True))
    shutil.rmtree(copy)
    shutil.rmtree(work / "pyarrow-same-out", ignore_errors=True)

    copy = fresh_copy(pristine, work / "arrow")
    results["ours_arrow"] = _timed(lambda: _ours(copy, ArrowExecutor(workers=2)))
    results["ours_arrow"]["rows_ok"] = _rows(copy) == rows_in
    shutil.rmtree(copy)

    copy = fresh_copy(pristine, work / "spark")
    t0 = time.perf_counter()
    executor = SparkExecutor(spark=spark, master="local[2]")
    executor.warm_up()
    jvm = time.perf_counter() - t0
    try:
        results["ours_spark"] = _timed(lambda: _ours(copy, executor))
    finally:
        executor.close()
    results["ours_spark"]["jvm_start_seconds"] = jvm
    if "seconds" in results["ours_spark"]:
        results["ours_spark"]["seconds_with_jvm"] = results["ours_spark"]["seconds"] + jvm
    results["ours_spark"]["rows_ok"] = _rows(copy) == rows_in
    shutil.rmtree(copy)
    shutil.rmtree(work, ignore_errors=True)
    return {
        "spec": {
            "files": spec.files,
            "rows_per_file": spec.rows_per_file,
            "partitions": spec.partitions,
            "target_bytes": TARGET,
        },
        "input_bytes": input_bytes,
        "rows": rows_in,
        "load_average": [round(x, 1) for x in os.getloadavg()],
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}",
        "results": results,
    }


def render(result: dict[str, Any]) -> str:
    r = result["results"]
    spec = result["spec"]
    gb = result["input_bytes"] / 1e9
    base = r["deltalake"].get("seconds")
    # the floor of our work: pyarrow alone writing with our settings (older results: Snappy)
    same = r.get("pyarrow_same", {})
    limit = same.get("seconds") or r["pyarrow"].get("seconds")

    base_bytes = r["deltalake"].get("bytes_added")

    def row(
        label: str,
        seconds: float | None,
        files: Any,
        ok: Any = "",
        out: int | None = None,
        memory: dict[str, Any] | None = None,
    ) -> str:
        if seconds is None:
            return f"| {label} | failed | | | | | | | |"
        rss = (
            f"{memory['peak_rss_mb']} ({memory['rss_before_mb']})"
            if memory and "peak_rss_mb" in memory
            else ""
        )
        vs_dl = f"{seconds / base:.2f}x" if base else "n/a"
        vs_pa = f"{seconds / limit:.2f}x" if limit else "n/a"
        rate = f"{gb / seconds * 1000:.0f}"
        mb = f"{out / 1e6:.0f}" if out else ""
        vs_bytes = f"{out / base_bytes:.2f}x" if out and base_bytes else ""
        return (
            f"| {label} | {seconds:.2f} | {rate} | {vs_dl} | {vs_pa} | {files} {ok} "
            f"| {mb} | {vs_bytes} | {rss} |"
        )

    spark = r["ours_spark"]
    lines = [
        f"OPTIMIZE of {spec['files']:,} files, {gb:.2f} GB, {result['rows']:,} rows in "
        f"{spec['partitions']} partitions, target {spec['target_bytes'] // 2**20} MiB; "
        f"{result['machine']}. Time ratios: lower is better (1.00x = same as the peer).",
        "",
        "| contender | seconds | MB/s | vs deltalake | vs pyarrow limit | files after "
        "| output MB | vs deltalake bytes | peak RSS of the process tree, MB (before) |",
        "|---|---|---|---|---|---|---|---|---|",
        row(
            "ours, Spark local[2], without JVM start",
            spark.get("seconds"),
            spark.get("files_after"),
            "" if spark.get("rows_ok") else "(ROWS DIFFER)",
            spark.get("bytes_added"),
            spark,
        ),
        row(
            "ours, Spark local[2], with JVM start",
            spark.get("seconds_with_jvm"),
            spark.get("files_after"),
        ),
        row(
            "ours, Arrow executor, 2 threads",
            r["ours_arrow"].get("seconds"),
            r["ours_arrow"].get("files_after"),
            "" if r["ours_arrow"].get("rows_ok") else "(ROWS DIFFER)",
            r["ours_arrow"].get("bytes_added"),
            r["ours_arrow"],
        ),
        row(
            "deltalake optimize.compact()",
            base,
            r["deltalake"].get("files_after"),
            out=base_bytes,
            memory=r["deltalake"],
        ),
        row(
            "pyarrow alone (read + write, no log; snappy)",
            r["pyarrow"].get("seconds"),
            r["pyarrow"].get("files_after"),
            out=r["pyarrow"].get("bytes_added"),
            memory=r["pyarrow"],
        ),
        *(
            [
                row(
                    "**pyarrow alone, our Parquet settings** (zstd 1, auto dictionary; the limit)",
                    same.get("seconds"),
                    same.get("files_after"),
                    out=same.get("bytes_added"),
                    memory=same,
                )
            ]
            if same
            else []
        ),
        "",
        f"Start (SparkSession/JVM plus the first Python workers importing txntable): "
        f"{spark.get('jvm_start_seconds', 0):.1f} s.",
    ]
    if "load_average" in result:
        lines.append(
            f"Load average (1/5/15 min) when the run ended: "
            f"{' / '.join(str(x) for x in result['load_average'])}."
        )
    errors = [f"{k}: {v['error']}" for k, v in r.items() if "error" in v]
    if errors:
        lines += ["", "Errors: " + "; ".join(errors)]
    if "compression" in result:
        lines += ["", render_compression(result["compression"])]
        errors = [
            f"{k}: {v['error']}"
            for k, v in result["compression"]["results"].items()
            if "error" in v
        ]
        if errors:
            lines += ["", "Errors: " + "; ".join(errors)]
    return "\n".join(lines)
