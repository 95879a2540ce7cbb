"""CompactionPolicy fields that reach the optimize job: spec.vacuum as flags, the deletion-vector
purge percentage and the Parquet settings in the settings document (``--options-json``), parsed
from manifests and checked like the API server does."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.unit.case_ids import readable
from tests.unit.policy_support import compaction_args, compaction_policy
from txntable.api.errors import InvalidSpecError
from txntable.api.types import CompactionPolicy


def _policy(vacuum: dict[str, Any] | None) -> CompactionPolicy:
    return compaction_policy({} if vacuum is None else {"vacuum": vacuum})


def _args(policy: CompactionPolicy) -> tuple[str, ...]:
    return compaction_args(policy)


@pytest.mark.parametrize(
    ("vacuum", "flags"),
    [
        pytest.param(None, [], id="off-by-default"),
        pytest.param({"enabled": False, "retention": "1d"}, [], id="disabled"),
        pytest.param({"enabled": True}, ["--vacuum"], id="table-retention"),
        pytest.param(
            {"enabled": True, "retention": "10d", "dryRun": True},
            ["--vacuum", "--vacuum-retention", "interval 864000 seconds", "--vacuum-dry-run"],
            id="retention-and-dry-run",
        ),
    ],
)
def test_vacuum_settings_become_job_flags(vacuum: dict[str, Any] | None, flags: list[str]) -> None:
    args = _args(_policy(vacuum))
    got = [a for a in args if a.startswith("--vacuum") or a.startswith("interval ")]
    assert got == flags


def test_a_bad_retention_is_a_spec_error() -> None:
    with pytest.raises(InvalidSpecError, match="retention"):
        _policy({"enabled": True, "retention": "1 month"})  # months have no fixed length


def _document(args: tuple[str, ...]) -> dict[str, Any]:
    """The settings document the job receives."""
    doc: dict[str, Any] = json.loads(args[args.index("--options-json") + 1])
    return doc


@pytest.mark.parametrize(("given", "sent"), [(None, 5), (20, 20)])
def test_the_deletion_vector_purge_percent_reaches_the_job(given: int | None, sent: int) -> None:
    policy = compaction_policy({} if given is None else {"deletionVectorPurgePercent": given})
    assert _document(_args(policy))["deletionVectorPurgePercent"] == sent
    with pytest.raises(InvalidSpecError, match="deletionVectorPurgePercent"):
        _policy_with({"deletionVectorPurgePercent": 0})


def _policy_with(extra: dict[str, Any]) -> CompactionPolicy:
    return compaction_policy(extra)


@pytest.mark.parametrize(
    ("parquet", "sent"),
    [
        pytest.param(None, {}, id="unset-leaves-it-to-the-table-and-the-job"),
        pytest.param({"compression": "zstd"}, {"compression": "zstd"}, id="codec"),
        pytest.param(
            {
                "compression": "gzip",
                "compressionLevel": 9,
                "rowGroupRows": 65536,
                "dictionary": "Off",
            },
            {
                "compression": "gzip",
                "compressionLevel": 9,
                "rowGroupRows": 65536,
                "dictionary": "off",
            },
            id="everything",
        ),
        pytest.param({"compressionLevel": 5}, {"compressionLevel": 5}, id="level-alone"),
    ],
)
def test_parquet_settings_reach_the_job(
    parquet: dict[str, Any] | None, sent: dict[str, Any]
) -> None:
    doc = _document(_args(_policy_with({} if parquet is None else {"parquet": parquet})))
    keys = ("compression", "compressionLevel", "rowGroupRows", "dictionary")
    assert {k: doc[k] for k in keys if doc[k] is not None} == sent


def test_the_job_accepts_the_flags_the_policy_gives() -> None:
    import argparse

    from txntable.jobs.optimize import add_arguments, options_from_args

    policy = _policy_with(
        {"parquet": {"compression": "gzip", "compressionLevel": 4, "dictionary": "Auto"}}
    )
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    known, _ = parser.parse_known_args(list(_args(policy)))
    settings = options_from_args(known)
    assert (settings.compression, settings.compression_level, settings.dictionary) == (
        "gzip",
        4,
        "auto",
    )


def test_the_policy_codecs_are_the_engines() -> None:
    from txntable.api.policies import ParquetCodec
    from txntable.engine.write.parquet_options import CODECS

    assert tuple(c.value for c in ParquetCodec) == CODECS


@pytest.mark.parametrize(
    ("parquet", "message"),
    [
        ({"compression": "snappy", "compressionLevel": 3}, "applies only to zstd and gzip"),
        ({"compression": "gzip", "compressionLevel": 12}, "gzip levels are 1 to 9"),
        ({"compression": "brotli"}, r"spec.parquet.compression: 'brotli' is not one of"),
        ({"dictionary": "auto"}, r"spec.parquet.dictionary: 'auto' is not one of"),
    ],
    ids=readable,
)
def test_bad_parquet_settings_are_spec_errors(parquet: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidSpecError, match=message):
        _policy_with({"parquet": parquet})
