"""The OPTIMIZE settings record: its JSON round trip, its refusals (of a type, a range, or a
contradiction, whichever way the value came), and that a policy (the controller's way) and a
human's flags (the CLI's way) give the same record for the same settings."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from tests.unit.policy_support import compaction_args, compaction_policy
from txntable.api.errors import InvalidSpecError
from txntable.api.optimize_options import OptimizeOptions
from txntable.api.types import CompactionPolicy
from txntable.jobs.optimize import add_arguments, options_from_args
from txntable.maintenance.errors import InvalidPolicyError

EVERY_SETTING = OptimizeOptions(
    target_file_size=1 << 30,
    min_file_size=1 << 20,
    min_input_files=3,
    max_files_per_bin=4,
    deletion_vector_purge_percent=20,
    max_bytes_per_run=5 << 30,
    partial_commit_size=2 << 30,
    where="d = '2024' AND `my col` IN ('a', 'b')",
    z_order_by=("x", "y"),
    avoid_recent_writes_ms=600_000,
    avoid_writes="any",
    compression="gzip",
    compression_level=9,
    row_group_rows=65536,
    dictionary="off",
)

#: the same settings as a CompactionPolicy spec ...
SPEC: dict[str, Any] = {
    "triggers": {"smallFiles": 2},
    "targetFileSize": "1Gi",
    "minFileSize": "1Mi",
    "minInputFiles": 3,
    "maxFilesPerBin": 4,
    "deletionVectorPurgePercent": 20,
    "maxBytesPerRun": "5Gi",
    "commit": {"partialCommitSize": "2Gi"},
    "partitionFilters": [
        {"column": "d", "operator": "Equals", "values": ["2024"]},
        {"column": "my col", "operator": "In", "values": ["a", "b"]},
    ],
    "zOrderBy": ["x", "y"],
    "avoidRecentWrites": {"within": "10m", "writes": "Any"},
    "parquet": {
        "compression": "gzip",
        "compressionLevel": 9,
        "rowGroupRows": 65536,
        "dictionary": "Off",
    },
}
#: ... and as a human's command line
FLAGS = [
    *("--target-size", "1Gi", "--min-file-size", "1Mi", "--min-input-files", "3"),
    *("--max-files-per-bin", "4"),
    *("--purge-deleted-percent", "20", "--max-bytes", "5Gi", "--commit-every", "2Gi"),
    *("--where", "d = '2024' AND `my col` IN ('a', 'b')", "--zorder-by", "x, y"),
    *("--avoid-partitions-written-within", "10m", "--avoid-writes", "any"),
    *("--compression", "gzip", "--compression-level", "9", "--row-group-rows", "65536"),
    *("--dictionary", "off"),
]


def _policy(spec: dict[str, Any]) -> CompactionPolicy:
    return compaction_policy(spec)


def _job_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def _controller_args(spec: dict[str, Any]) -> list[str]:
    """What the controller starts the job with, less what a launcher adds (``--master``)."""
    args = list(compaction_args(compaction_policy(spec)))
    at = args.index("--master")
    return args[:at] + args[at + 2 :]


@pytest.mark.parametrize("options", [OptimizeOptions(), EVERY_SETTING], ids=["defaults", "every"])
def test_the_document_round_trips_through_json(options: OptimizeOptions) -> None:
    assert OptimizeOptions.from_json(options.to_json()) == options
    assert OptimizeOptions.loads(options.dumps()) == options
    assert json.loads(options.dumps()) == options.to_json()


def test_keys_are_camel_case_and_every_setting_is_written() -> None:
    doc = EVERY_SETTING.to_json()
    assert doc["targetFileSize"] == 1 << 30 and doc["zOrderBy"] == ["x", "y"]
    assert doc["deletionVectorPurgePercent"] == 20 and doc["avoidRecentWritesMs"] == 600_000
    assert all(k[0].islower() and "_" not in k for k in doc)


def test_a_missing_key_takes_its_default() -> None:
    assert OptimizeOptions.from_json({}) == OptimizeOptions()
    assert OptimizeOptions.from_json({"minInputFiles": 4}).min_input_files == 4


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"targetSize": 5}, "optimizeOptions.targetSize: unknown setting"),
        ({"targetFileSize": "1Gi"}, "optimizeOptions.targetFileSize: must be int"),
        ({"minInputFiles": True}, "optimizeOptions.minInputFiles: must be int"),
        ({"maxBytesPerRun": 1.5}, "optimizeOptions.maxBytesPerRun: must be int"),
        ({"zOrderBy": "x,y"}, "optimizeOptions.zOrderBy: must be a list of strings"),
        ({"zOrderBy": ["x", 1]}, "optimizeOptions.zOrderBy: must be a list of strings"),
        ({"minInputFiles": 1}, "optimizeOptions.minInputFiles: must be at least 2 files"),
        ({"deletionVectorPurgePercent": 0}, r"deletionVectorPurgePercent: must be in \[1, 100\]"),
        ({"avoidWrites": "all"}, "optimizeOptions.avoidWrites: must be one of removes, any"),
        ({"zOrderBy": ["x", "x"]}, r"optimizeOptions.zOrderBy: bad Z-order columns \['x', 'x'\]"),
        ({"where": 3}, "optimizeOptions.where: must be str"),
        ([], "optimizeOptions: must be a JSON object"),
    ],
)
def test_bad_documents_are_refused_naming_the_key(doc: object, message: str) -> None:
    with pytest.raises(InvalidSpecError, match=message):
        OptimizeOptions.from_json(doc)


def test_every_bad_key_is_named_at_once() -> None:
    with pytest.raises(InvalidSpecError) as err:
        OptimizeOptions.from_json({"a": 1, "maxBytesPerRun": "x"})
    assert [path for path, _ in err.value.errors] == [
        "optimizeOptions.a",
        "optimizeOptions.maxBytesPerRun",
    ]


def test_the_controller_sends_the_document_of_its_policy() -> None:
    args = _controller_args(SPEC)
    sent = OptimizeOptions.loads(args[args.index("--options-json") + 1])
    assert sent == EVERY_SETTING == OptimizeOptions.from_spec(_policy(SPEC).spec)


def test_flags_and_the_controller_make_the_same_record() -> None:
    human = _job_args(["s3://bucket/t", *FLAGS])
    controller = _job_args(_controller_args(SPEC))
    assert options_from_args(human) == options_from_args(controller) == EVERY_SETTING
    # and the plan shown in status plans with that same record
    assert OptimizeOptions.from_spec(_policy(SPEC).spec) == options_from_args(controller)


def test_the_default_policy_is_the_same_either_way() -> None:
    """A policy with every field left to its default, and no flags at all, differ only where the
    CRD's defaults differ from the job's (which a policy always sends)."""
    spec = _policy({"triggers": {"smallFiles": 2}}).spec
    sent = OptimizeOptions.from_spec(spec)
    assert options_from_args(_job_args(["t"])) == OptimizeOptions()
    assert (sent.min_file_size, sent.max_bytes_per_run) == (
        spec.min_file_size,
        spec.max_bytes_per_run,
    )
    assert options_from_args(_job_args(["t", "--options-json", sent.dumps()])) == sent


def test_flags_override_the_document_key_by_key() -> None:
    args = _job_args(
        ["t", "--options-json", EVERY_SETTING.dumps(), "--min-input-files", "4", "--where", ""]
    )
    got = options_from_args(args)
    assert got.min_input_files == 4 and got.where is None
    assert got.target_file_size == EVERY_SETTING.target_file_size


def test_a_bad_document_is_bad_input_for_the_job() -> None:
    with pytest.raises(InvalidPolicyError, match=r"--options-json: .*unknown setting"):
        options_from_args(_job_args(["t", "--options-json", '{"nope": 1}']))
    with pytest.raises(InvalidPolicyError, match="--options-json: optimizeOptions: not JSON"):
        options_from_args(_job_args(["t", "--options-json", "{"]))
    # a value out of range, named as it was given: by its flag, or by its key in the document
    with pytest.raises(
        InvalidPolicyError,
        match=r"^--options-json: optimizeOptions.minInputFiles: must be at least 2",
    ):
        options_from_args(_job_args(["t", "--options-json", '{"minInputFiles": 1}']))
    with pytest.raises(
        InvalidPolicyError,
        match=r"^--max-files-per-bin: max files per bin \(2\) must not be below min input files",
    ):
        options_from_args(_job_args(["t", "--max-files-per-bin", "2", "--min-input-files", "3"]))
    with pytest.raises(InvalidPolicyError, match=r"^--target-size: '1Gx' is not"):
        options_from_args(_job_args(["t", "--target-size", "1Gx"]))
