"""Manifests broken one thing at a time, with what the API server and the models say of each."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.unit.crdtools import MISSING, load_crds, load_examples
from txntable.api import CompactionPolicy, InvalidSpecError

CRDS = load_crds()
BASE = {
    (p.name, d["kind"]): d
    for p, d in load_examples()
    if d["kind"] in CRDS and p.parent.name != "local"
}
TABLE = BASE["table-s3.yaml", "TxnTable"]
NIGHTLY = BASE["compaction-nightly-zorder.yaml", "CompactionPolicy"]
CKPT = BASE["checkpoint-policy.yaml", "CheckpointPolicy"]
AUTHENTICATE = "spark.kubernetes.authenticate.driver.serviceAccountName"


@dataclass(frozen=True)
class Case:
    name: str
    base: dict[str, Any]
    edit: Callable[[dict[str, Any]], None]
    api_says: str  # substring of the schema error or CEL message
    path: str  # InvalidSpecError.field_path from the models
    update: bool = False  # apply as an update of the unmodified base (oldSelf rules)


def put(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """An edit that sets (or, with MISSING, deletes) a dotted path in the manifest."""

    def edit(doc: dict[str, Any]) -> None:
        *parents, leaf = path.split(".")
        node = doc
        for key in parents:
            node = node.setdefault(key, {})
        if value is MISSING:
            del node[leaf]
        else:
            node[leaf] = value

    return edit


SECRET_MSG = "credentials must come from a Secret"
CASES = [
    # ------------------------------------------------------------------ TxnTable
    Case("inline credential option", TABLE,
         put("spec.storage.options.AWS_SECRET_ACCESS_KEY", "abc"), SECRET_MSG,
         "spec.storage.options[AWS_SECRET_ACCESS_KEY]"),
    Case("inline s3a secret key", TABLE,
         lambda d: d["spec"]["storage"]["options"].update({"fs.s3a.secret.key": "abc"}),
         SECRET_MSG, "spec.storage.options[fs.s3a.secret.key]"),
    Case("inline accessKey field", TABLE, put("spec.storage.accessKey", "AKIA"),
         "Additional properties are not allowed", "spec.storage.accessKey"),
    Case("missing location", TABLE, put("spec.location", MISSING),
         "'location' is a required property", "spec.location"),
    Case("location scheme not supported", TABLE, put("spec.location", "ftp://host/t"),
         "does not match", "spec.location"),
    Case("location on GCS (no put-if-absent here)", TABLE, put("spec.location", "gs://b/t"),
         "does not match", "spec.location"),
    Case("location on HDFS", TABLE, put("spec.location", "hdfs://nn/t"),
         "does not match", "spec.location"),
    Case("mutated location on update", TABLE, put("spec.location", "s3://other/t"),
         "location is immutable", "spec.location", update=True),
    Case("partition column not a column", TABLE, put("spec.create.partitionColumns", ["day"]),
         "every partition column must be one of the columns", "spec.create.partitionColumns[0]"),
    Case("duplicate column", TABLE,
         put("spec.create.columns", [{"name": "a", "type": "long"}, {"name": "a", "type": "date"}]),
         "Duplicate value", "spec.create.columns[1]"),
    Case("unknown column type", TABLE,
         put("spec.create.columns", [{"name": "a", "type": "varchar"}]), "does not match",
         "spec.create.columns[0].type"),
    Case("secretRef name not a DNS name", TABLE, put("spec.storage.secretRef.name", "Lake_Creds"),
         "does not match", "spec.storage.secretRef.name"),
    Case("observeInterval not a duration", TABLE, put("spec.observeInterval", "5 fortnights"),
         "does not match", "spec.observeInterval"),
    Case("suspend not a boolean", TABLE, put("spec.suspend", "yes"),
         "is not of type 'boolean'", "spec.suspend"),
    # ------------------------------------------------------------------ CompactionPolicy
    Case("min file size above target", NIGHTLY, put("spec.minFileSize", "1Gi"),
         "minFileSize must not exceed targetFileSize", "spec"),
    Case("min above target, bytes vs quantity", NIGHTLY, put("spec.minFileSize", 536870913),
         "minFileSize must not exceed targetFileSize", "spec"),
    Case("max files per bin below min input files (4)", NIGHTLY, put("spec.maxFilesPerBin", 3),
         "maxFilesPerBin must not be below minInputFiles", "spec"),
    Case("max files per bin of one", NIGHTLY, put("spec.maxFilesPerBin", 1),
         "less than the minimum of 2", "spec.maxFilesPerBin"),
    Case("memory ceiling below the executor heap", NIGHTLY,
         put("spec.spark.autoSize.maxExecutorMemory", "1Gi"),
         "autoSize.maxExecutorMemory must exceed executor.memory", "spec.spark"),
    # issue 23.11: above the heap (16Gi) but not above heap + overhead (16Gi + 1.6Gi, the
    # executor pod) protects nothing
    Case("memory ceiling below the executor pod", NIGHTLY,
         put("spec.spark.autoSize.maxExecutorMemory", "17Gi"),
         "plus Spark's memory overhead", "spec.spark"),
    Case("memory ceiling equal to the executor pod", NIGHTLY,
         put("spec.spark.autoSize.maxExecutorMemory", 16 * 2**30 + 16 * 2**30 // 10),
         "plus Spark's memory overhead", "spec.spark"),
    # issue 23.5: keys the run builders set
    Case("reserved sparkConf key", NIGHTLY,
         put("spec.spark.sparkConf", {"spark.executor.memory": "8g"}),
         "sparkConf keys txntable sets itself", "spec.spark.sparkConf[spark.executor.memory]"),
    Case("reserved sparkConf prefix", NIGHTLY,
         put("spec.spark.sparkConf", {AUTHENTICATE: "x"}),
         "sparkConf keys txntable sets itself", f"spec.spark.sparkConf[{AUTHENTICATE}]"),
    Case("reserved sparkConf key, checkpoint policy", CKPT,
         put("spec.spark.sparkConf", {"spark.master": "local[8]"}),
         "sparkConf keys txntable sets itself", "spec.spark.sparkConf[spark.master]"),
    # issue 23.3: what no cron implementation evaluates
    Case("cron range runs backwards", NIGHTLY, put("spec.triggers.schedule", "30-10 * * * *"),
         "runs backwards", "spec.triggers.schedule"),
    Case("cron day range runs backwards", NIGHTLY, put("spec.triggers.schedule", "0 2 * * FRI-MON"),
         "runs backwards", "spec.triggers.schedule"),
    Case("cron range with a step runs backwards", NIGHTLY,
         put("spec.triggers.schedule", "0 20-4/2 * * *"), "runs backwards",
         "spec.triggers.schedule"),
    Case("negative size integer", NIGHTLY, put("spec.targetFileSize", -1),
         "less than the minimum of 1", "spec.targetFileSize"),
    Case("negative size quantity", NIGHTLY, put("spec.targetFileSize", "-128Mi"),
         "does not match", "spec.targetFileSize"),
    Case("zero size", NIGHTLY, put("spec.maxBytesPerRun", "0"), "does not match",
         "spec.maxBytesPerRun"),
    Case("size not a Kubernetes quantity", NIGHTLY, put("spec.targetFileSize", "512MB"),
         "does not match", "spec.targetFileSize"),
    Case("bad cron: words", NIGHTLY, put("spec.triggers.schedule", "every night"),
         "does not match", "spec.triggers.schedule"),
    Case("bad cron: minute 61", NIGHTLY, put("spec.triggers.schedule", "61 2 * * *"),
         "does not match", "spec.triggers.schedule"),
    Case("bad cron: four fields", NIGHTLY, put("spec.triggers.schedule", "0 2 * *"),
         "does not match", "spec.triggers.schedule"),
    Case("cron with TZ prefix", NIGHTLY, put("spec.triggers.schedule", "TZ=UTC 0 2 * * *"),
         "does not match", "spec.triggers.schedule"),
    Case("no schedule and no threshold", NIGHTLY, put("spec.triggers", {"cooldown": "5m"}),
         "set a schedule or at least one threshold", "spec.triggers"),
    Case("missing triggers", NIGHTLY, put("spec.triggers", MISSING),
         "'triggers' is a required property", "spec.triggers"),
    Case("unknown backend", NIGHTLY, put("spec.spark.backend", "Flink"),
         "is not one of", "spec.spark.backend"),
    Case("bad timeZone", NIGHTLY, put("spec.timeZone", "+02:00"), "does not match",
         "spec.timeZone"),
    Case("timeZone lowercase", NIGHTLY, put("spec.timeZone", "europe/berlin"), "does not match",
         "spec.timeZone"),
    Case("empty maintenance window", NIGHTLY,
         put("spec.maintenanceWindows", [{"start": "02:00", "end": "02:00"}]),
         "must not start and end at the same time", "spec.maintenanceWindows[0]"),
    Case("window hour 25", NIGHTLY,
         put("spec.maintenanceWindows", [{"start": "25:00", "end": "02:00"}]),
         "does not match", "spec.maintenanceWindows[0].start"),
    Case("window day misspelt", NIGHTLY,
         put("spec.maintenanceWindows", [{"start": "01:00", "end": "02:00", "days": ["Monday"]}]),
         "is not one of", "spec.maintenanceWindows[0].days[0]"),
    Case("duplicate zOrderBy column", NIGHTLY, put("spec.zOrderBy", ["a", "a"]),
         "Duplicate value", "spec.zOrderBy[1]"),
    Case("too many zOrderBy columns", NIGHTLY, put("spec.zOrderBy", list("abcdefghi")),
         "is too long", "spec.zOrderBy"),
    Case("Equals with two values", NIGHTLY,
         put("spec.partitionFilters", [{"column": "d",
                                       "operator": "Equals", "values": ["1", "2"]}]),
         "other operators exactly one", "spec.partitionFilters[0]"),
    Case("selector In without values", NIGHTLY,
         put("spec.tableSelector", {"matchExpressions": [{"key": "tier", "operator": "In"}]}),
         "operators In and NotIn require values", "spec.tableSelector.matchExpressions[0]"),
    Case("selector Exists with values", NIGHTLY,
         put("spec.tableSelector",
             {"matchExpressions": [{"key": "t", "operator": "Exists", "values": ["x"]}]}),
         "operators In and NotIn require values", "spec.tableSelector.matchExpressions[0]"),
    Case("concurrencyPolicy Allow", NIGHTLY, put("spec.concurrencyPolicy", "Allow"),
         "is not one of", "spec.concurrencyPolicy"),
    Case("secret in sparkConf", NIGHTLY,
         put("spec.spark.sparkConf", {"spark.hadoop.fs.s3a.secret.key": "abc"}), SECRET_MSG,
         "spec.spark.sparkConf[spark.hadoop.fs.s3a.secret.key]"),
    Case("minInputFiles 1", NIGHTLY, put("spec.minInputFiles", 1), "less than the minimum of 2",
         "spec.minInputFiles"),
    Case("smallFilePercent above 100", NIGHTLY, put("spec.triggers.smallFilePercent", 101),
         "greater than the maximum of 100", "spec.triggers.smallFilePercent"),
    Case("executor memory negative", NIGHTLY, put("spec.spark.executor.memory", "-4Gi"),
         "does not match", "spec.spark.executor.memory"),
    Case("unknown field in spec", NIGHTLY, put("spec.schedule", "0 2 * * *"),
         "Additional properties are not allowed", "spec.schedule"),
    Case("parquet codec brotli", NIGHTLY, put("spec.parquet", {"compression": "brotli"}),
         "is not one of", "spec.parquet.compression"),
    Case("parquet level for snappy", NIGHTLY,
         put("spec.parquet", {"compression": "snappy", "compressionLevel": 3}),
         "compressionLevel applies only to zstd and gzip", "spec.parquet"),
    Case("parquet gzip level 12", NIGHTLY,
         put("spec.parquet", {"compression": "gzip", "compressionLevel": 12}),
         "gzip levels are 1 to 9", "spec.parquet"),
    Case("parquet zstd level 23", NIGHTLY,
         put("spec.parquet", {"compression": "zstd", "compressionLevel": 23}),
         "greater than the maximum of 22", "spec.parquet.compressionLevel"),
    Case("parquet dictionary lowercase", NIGHTLY, put("spec.parquet", {"dictionary": "auto"}),
         "is not one of", "spec.parquet.dictionary"),
    # ------------------------------------------------------------------ CheckpointPolicy
    Case("commitInterval 0", CKPT, put("spec.commitInterval", 0), "less than the minimum of 1",
         "spec.commitInterval"),
    Case("unknown mode", CKPT, put("spec.mode", "Sometimes"), "is not one of", "spec.mode"),
    Case("retention in months", CKPT, put("spec.logCleanup.logRetention", "1 month"),
         "does not match", "spec.logCleanup.logRetention"),
    Case("maxAge as a number", CKPT, put("spec.maxAge", 3600), "is not of type 'string'",
         "spec.maxAge"),
    Case("partSize too small", CKPT, put("spec.partSize", 10), "less than the minimum of 1000",
         "spec.partSize"),
    Case("unknown field interval", CKPT, put("spec.interval", 10),
         "Additional properties are not allowed", "spec.interval"),
    Case("token in sparkConf", CKPT,
         put("spec.spark.sparkConf", {"spark.hadoop.fs.s3a.session.token": "t"}), SECRET_MSG,
         "spec.spark.sparkConf[spark.hadoop.fs.s3a.session.token]"),
]  # fmt: skip


def _build(case: Case) -> tuple[dict[str, Any], Any]:
    doc = copy.deepcopy(case.base)
    case.edit(doc)
    return doc, (case.base if case.update else MISSING)


#: (executor heap, autoSize ceiling) either side of heap + overhead (10% of the heap, at least
#: 384Mi): in bytes and in quantities, decimal and binary, fractional (which kube-apiserver keeps
#: as decimals), where the minimum applies and where it does not; all whole bytes (the models
#: refuse a fraction of a byte, the CRD's pattern does not). Also sent to the real API server
#: (tests/controlplane/test_admission.py).
CEILINGS = [
    ("1Gi", "1408Mi"), ("1Gi", 1476395009), ("1Gi", "1409Mi"),
    ("3840Mi", "4224Mi"), ("3840Mi", "4225Mi"),
    ("3850Mi", 3850 * 2**20 + 385 * 2**20), ("3850Mi", 3850 * 2**20 + 385 * 2**20 + 1),
    ("3843Mi", 3843 * 2**20 + 3843 * 2**20 // 10),
    ("3843Mi", 3843 * 2**20 + 3843 * 2**20 // 10 + 1),
    ("16Gi", "17Gi"), ("16Gi", 18897856102), ("16Gi", 18897856103), ("16Gi", "18G"),
    ("16Gi", "19G"), ("15G", "16.5G"), ("15G", "16500000001"), ("1.5Gi", "1920Mi"),
    ("1.5Gi", "1921Mi"), ("1.5Gi", "1.875Gi"), ("4.5Gi", 5315022028), ("4.5Gi", 5315022029),
    ("7.5Gi", "8.25Gi"), ("7.5Gi", 8858370049), ("123456Gi", "135801Gi"),
    ("123456Gi", "135802Gi"),
]  # fmt: skip


def ceiling_doc(heap: str, ceiling: str | int) -> dict[str, Any]:
    doc = copy.deepcopy(NIGHTLY)
    doc["spec"]["spark"]["executor"]["memory"] = heap
    doc["spec"]["spark"]["autoSize"]["maxExecutorMemory"] = ceiling
    return doc


def model_refuses(doc: dict[str, Any]) -> bool:
    try:
        CompactionPolicy.from_manifest(doc)
    except InvalidSpecError:
        return True
    return False


#: size spellings and the bytes they are: None where both the CRD and the model refuse them
SIZES: list[tuple[str, int | None]] = [
    ("1536", 1536),
    ("128Mi", 128 * 2**20),
    ("1.5Gi", 3 * 2**29),
    ("1.25Ki", 1280),
    ("1.0625Ki", 1088),  # sixteenths of a binary unit are whole bytes
    ("1.50Ki", 1536),
    ("1.5k", 1500),
    ("1.001k", 1001),
    ("1.5000k", 1500),
    ("2.000001M", 2_000_001),
    ("1.1Ki", None),  # 1126.4 bytes
    ("1.3Ki", None),  # 1331.2 bytes
    ("1.05Ki", None),  # 1075.2 bytes
    ("1.03125Ki", None),  # 1056 bytes, but thirty-seconds are not admitted (write 1056)
    ("1.0001k", None),  # 1000.1 bytes
    ("1.0000001M", None),  # 1000000.1 bytes
    ("1.5", None),  # a fraction of a byte
    ("0.5Ki", None),  # 512 bytes: written 512
    ("0", None),
]
