"""Commits on S3 through conditional PUT, against moto's S3 server (real HTTP, real 412s).

Covers the S3 half of the put-if-absent contract: two processes racing for one version (one
wins, the other retries onto the next), lost responses (a PUT that landed but whose answer never
arrived must not become a second commit), 409 in-flight conflicts, stores declared without
conditional writes, and delta-rs reading what we wrote there.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from botocore.exceptions import ClientError, ReadTimeoutError
from deltalake import DeltaTable

from tests.faults import LANDED_EXISTS, FaultyStorage
from tests.integration.concurrent_writers import SCHEMA, race_two_processes
from tests.support.s3_moto import BUCKET, _batch, _new_table, _options
from txntable.engine.errors import UnsafeCommitStorageError
from txntable.engine.storage.base import FileExistsInStoreError
from txntable.engine.storage.s3 import S3Storage
from txntable.engine.table import Table

pytestmark = pytest.mark.integration


def _commit_names(table: Table) -> list[str]:
    return [f.name for f in table.storage.list_log() if f.name.endswith(".json")]


def test_commits_on_s3_are_read_by_deltalake(endpoint: str) -> None:
    uri, table = _new_table(endpoint)
    table.append(_batch([1, 2]))
    table.append(_batch([3], "b"))
    table.delete("p = 'b'")
    dl = DeltaTable(
        uri,
        storage_options={
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_REGION": "us-east-1",
        },
    )
    assert dl.version() == 3
    assert sorted(pa.table(dl.to_pyarrow_table()).column("id").to_pylist()) == [1, 2]
    assert _commit_names(table) == [f"{v:020d}.json" for v in range(4)]
    assert table.storage.has_log_files()
    assert not S3Storage(f"{uri}-none", _options(endpoint)).has_log_files()


def test_two_processes_racing_for_one_version(endpoint: str, tmp_path: Path) -> None:
    uri, table = _new_table(endpoint)
    table.append(_batch([0]))
    results = race_two_processes(uri, _options(endpoint), tmp_path / "go", timeout=60)
    assert {r["read_version"] for r in results} == {1}
    assert sorted(r["version"] for r in results) == [2, 3]
    assert sorted(r["attempts"] for r in results) == [1, 2]  # the loser retried once
    assert _commit_names(table) == [f"{v:020d}.json" for v in range(4)]
    ids = [i for r in results for i in r["ids"]]
    reread = Table.open(uri, _options(endpoint)).snapshot()
    assert reread.version == 3 and reread.num_files == 3
    assert len(ids) == 10


def test_lost_response_of_a_landed_put_is_not_a_second_commit(endpoint: str) -> None:
    uri, table = _new_table(endpoint)
    storage = table.storage
    assert isinstance(storage, S3Storage)
    calls: list[str] = []
    last_key: list[str] = []

    def remember_key(params: dict[str, Any], **_: Any) -> None:
        last_key[:] = [params["Key"]]

    def drop_first_commit_answer(**_: Any) -> None:
        key = last_key[0]
        if "/_delta_log/" in key and key.endswith(".json") and not calls:
            calls.append(key)
            raise ReadTimeoutError(endpoint_url=endpoint)

    storage.client.meta.events.register("provide-client-params.s3.PutObject", remember_key)
    storage.client.meta.events.register("after-call.s3.PutObject", drop_first_commit_answer)
    result = table.append(_batch([1]))
    assert calls == [f"{storage.prefix}/_delta_log/{1:020d}.json"]
    assert result.version == 1
    assert _commit_names(table) == [f"{v:020d}.json" for v in range(2)]
    assert Table.open(uri, _options(endpoint)).snapshot().num_files == 1


def test_landed_commit_reported_as_exists_is_recognised_by_txn_id(endpoint: str) -> None:
    uri, _ = _new_table(endpoint)
    faulty = FaultyStorage(S3Storage(uri, _options(endpoint)))
    faulty.inject(LANDED_EXISTS)
    result = Table(faulty).append(_batch([1]))
    assert result.version == 1
    assert [f.name for f in faulty.list_log() if f.name.endswith(".json")] == [
        f"{v:020d}.json" for v in range(2)
    ]


def test_in_flight_conflict_409_is_retried(endpoint: str) -> None:
    _, table = _new_table(endpoint)
    storage = table.storage
    assert isinstance(storage, S3Storage)
    seen: list[int] = []

    def conflict_once(params: dict[str, Any], **_: Any) -> None:
        if params.get("IfNoneMatch") and not seen:
            seen.append(1)
            raise ClientError(
                {
                    "Error": {"Code": "ConditionalRequestConflict", "Message": "in flight"},
                    "ResponseMetadata": {"HTTPStatusCode": 409},
                },
                "PutObject",
            )

    storage.client.meta.events.register("provide-client-params.s3.PutObject", conflict_once)
    assert table.append(_batch([1])).version == 1
    assert seen == [1]


def test_store_without_conditional_put_refuses_to_commit(endpoint: str) -> None:
    uri, _ = _new_table(endpoint)
    options = _options(endpoint) | {"conditional_put": "false"}
    table = Table.open(uri, options)
    with pytest.raises(UnsafeCommitStorageError, match="singleWriter"):
        table.append(_batch([1]))
    assert len(_commit_names(table)) == 1


def test_every_cli_command_reaches_s3_through_storage_options(
    endpoint: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """inspect, checkpoint and cleanup take --storage-option (and TXNTABLE_STORAGE_OPTIONS) as
    optimize does; before, object-store tables worked only through environment variables."""
    import json as _json

    from txntable.cli.main import main as cli

    uri, table = _new_table(endpoint)
    table.append(_batch([1, 2]))
    flags = [a for k, v in _options(endpoint).items() for a in ("--storage-option", f"{k}={v}")]
    assert cli(["inspect", uri, "--json", *flags]) == 0
    assert _json.loads(capsys.readouterr().out)["version"] == 1
    assert cli(["checkpoint", uri, "--json", *flags]) == 0
    assert _json.loads(capsys.readouterr().out)["version"] == 1
    assert f"{1:020d}.checkpoint.parquet" in [f.name for f in table.storage.list_log()]
    monkeypatch.setenv("TXNTABLE_STORAGE_OPTIONS", _json.dumps(_options(endpoint)))
    assert cli(["cleanup", uri, "--dry-run", "--json"]) == 0
    assert _json.loads(capsys.readouterr().out)["dryRun"] is True
    monkeypatch.delenv("TXNTABLE_STORAGE_OPTIONS")
    assert cli(["cleanup", uri, "--json", "--storage-option", "not-a-pair"]) == 1
    assert "not KEY=VALUE" in capsys.readouterr().err


def test_vacuum_lists_and_deletes_on_s3(endpoint: str) -> None:
    """VACUUM's recursive listing and parallel deletes on S3: an orphan object goes, live files,
    the log and hidden objects stay."""
    from txntable.engine.vacuum import vacuum

    uri, table = _new_table(endpoint)
    table.append(_batch([1, 2], "a"))
    table.append(_batch([3], "b"))
    table.storage.write("p=a/orphan.parquet", b"x")
    table.storage.write("_hidden/x.parquet", b"x")
    snapshot = Table.open(uri, _options(endpoint)).snapshot()
    live = set(snapshot.files().column("path").to_pylist())
    dry = vacuum(snapshot, retention_ms=0, force=True, dry_run=True)
    assert dry.files == ("p=a/orphan.parquet",)
    done = vacuum(snapshot, retention_ms=0, force=True)
    assert done.num_deleted == 1
    names = {f.name for f in table.storage.list_tree()}
    assert "p=a/orphan.parquet" not in names
    assert live | {"_hidden/x.parquet"} <= names
    assert any(n.startswith("_delta_log/") for n in names)
    assert Table.open(uri, _options(endpoint)).snapshot().num_files == len(live)


def test_object_store_option_names_end_to_end(
    endpoint: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The names delta-rs users write (AWS_ENDPOINT_URL, AWS_ALLOW_HTTP, AWS_CONDITIONAL_PUT,
    a locking provider) create, commit and read a table; objects get the encryption asked for;
    deltalake reads it back with the same names from its environment."""
    import logging

    from tests import oracle_read

    secret = "moto-secret-value-never-logged"
    options = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": secret,
        "AWS_REGION": "us-east-1",
        "AWS_CONDITIONAL_PUT": "etag",
        "AWS_S3_LOCKING_PROVIDER": "dynamodb",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
        "AWS_SERVER_SIDE_ENCRYPTION": "AES256",
    }
    uri = f"s3://{BUCKET}/names-{uuid.uuid4().hex[:8]}"
    with caplog.at_level(logging.INFO):
        table = Table.create(uri, SCHEMA, partition_by=["p"], storage_options=options)
        table.append(_batch([1, 2]))
        Table.open(uri, options).append(_batch([3], "b"))
    storage = table.storage
    assert isinstance(storage, S3Storage) and storage.atomic_put_if_absent
    assert set(storage.options_without_effect) == {"AWS_S3_LOCKING_PROVIDER"}
    assert _commit_names(table) == [f"{v:020d}.json" for v in range(3)]
    commit = storage.client.head_object(
        Bucket=BUCKET, Key=f"{storage.prefix}/_delta_log/{2:020d}.json"
    )
    assert commit["ServerSideEncryption"] == "AES256"
    assert all(secret not in r.getMessage() for r in caplog.records)
    # a second writer on the same version still meets the conditional PUT
    with pytest.raises(FileExistsInStoreError):
        storage.write_if_absent(f"_delta_log/{2:020d}.json", b"{}")
    for name, value in options.items():
        monkeypatch.setenv(name, value)
    seen = oracle_read.read(uri)
    assert seen["version"] == 2 and seen["rows"] == 3


def test_optimize_reads_files_named_by_absolute_s3_uri(
    endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A data file outside the table root (a shallow clone's) is read through our S3 client with
    the option names the table uses; fsspec knew neither those names nor had a client here."""
    from dataclasses import replace

    from tests import oracle_read
    from txntable.api.optimize_options import OptimizeOptions
    from txntable.engine.commit.transaction import Transaction
    from txntable.maintenance.executor_arrow import ArrowExecutor
    from txntable.maintenance.optimize import optimize

    options = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
    }
    uri = f"s3://{BUCKET}/abs-{uuid.uuid4().hex[:8]}"
    table = Table.create(uri, SCHEMA, partition_by=["p"], storage_options=options)
    for i in range(4):
        table.append(_batch([10 * i, 10 * i + 1]))
    snapshot = table.snapshot()
    storage = table.storage
    assert isinstance(storage, S3Storage)
    txn = Transaction(table, snapshot)
    for add in list(snapshot.add_actions())[:2]:
        key = f"elsewhere-{uuid.uuid4().hex[:8]}/{add.path.rsplit('/', 1)[-1]}"
        storage.client.put_object(Bucket=BUCKET, Key=key, Body=storage.read(add.path))
        txn.add(
            add.to_remove(deletion_timestamp=0, data_change=False),
            replace(add, path=f"s3://{BUCKET}/{key}", data_change=False),
        )
    txn.commit("RESTORE")

    result = optimize(
        Table.open(uri, options),
        OptimizeOptions(target_file_size=1 << 30),
        ArrowExecutor(),
        storage_options=options,
    )

    assert result.error is None and result.bins_committed == 1, result.to_json()
    for name, value in options.items():
        monkeypatch.setenv(name, value)
    seen = oracle_read.read(uri)
    assert seen["rows"] == 8 and seen["version"] == result.version


def test_a_data_files_footer_is_read_with_one_suffix_range(endpoint: str) -> None:
    """Issue 33.3: OPTIMIZE counts the rows of a file without ``numRecords`` from its footer, the
    object's last bytes only (``Range: bytes=-N``), and gets the whole of a shorter object."""
    from txntable.engine.read.data_files import read_footer

    _uri, table = _new_table(endpoint)
    table.append(_batch(list(range(500))))
    add = next(table.snapshot().add_actions())
    storage = table.storage
    whole = storage.read(add.path)
    assert storage.read_tail(add.path, 8) == whole[-8:] and whole.endswith(b"PAR1")
    assert storage.read_tail(add.path, len(whole) + 100) == whole
    assert read_footer(storage, add.path).num_rows == 500
    with pytest.raises(FileNotFoundError):
        storage.read_tail("gone.parquet", 8)
