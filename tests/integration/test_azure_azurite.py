"""Commits on Azure Blob Storage through conditional PUT, against Azurite (Microsoft's emulator,
real HTTP, real 409s for If-None-Match: *).

The Azure half of the put-if-absent contract: object_store's option names end to end, two
processes racing for one version (one wins, the other retries onto the next), a PUT whose answer
was lost (the blob holds our bytes: success, not a second commit), VACUUM's listing and
deletes, the command line, and deltalake reading what we wrote. `make setup` installs Azurite
from npm into .venv/azurite.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests import oracle_read
from tests.integration.concurrent_writers import SCHEMA, race_two_processes
from tests.support.azurite import CONTAINER, _options
from txntable.engine.errors import InvalidArgumentError, StorageError
from txntable.engine.storage.azure import AzureStorage
from txntable.engine.storage.azure_options import EMULATOR_ACCOUNT, EMULATOR_KEY
from txntable.engine.storage.base import FileExistsInStoreError
from txntable.engine.storage.factory import open_storage
from txntable.engine.table import Table

pytestmark = pytest.mark.integration


def _new_table(url: str) -> tuple[str, Table]:
    uri = f"az://{CONTAINER}/t-{uuid.uuid4().hex[:8]}"
    table = Table.create(uri, SCHEMA, partition_by=["p"], storage_options=_options(url))
    return uri, table


def _commit_names(table: Table) -> list[str]:
    return [f.name for f in table.storage.list_log() if f.name.endswith(".json")]


def _batch(ids: list[int], part: str = "a") -> pa.Table:
    return pa.table({"id": ids, "writer": ["t"] * len(ids), "p": [part] * len(ids)}, schema=SCHEMA)


def test_commits_on_azure_are_read_by_deltalake(
    blob_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, table = _new_table(blob_url)
    table.append(_batch([1, 2]))
    table.append(_batch([3], "b"))
    table.delete("p = 'b'")
    assert isinstance(table.storage, AzureStorage) and table.storage.atomic_put_if_absent
    assert _commit_names(table) == [f"{v:020d}.json" for v in range(4)]
    assert table.storage.has_log_files()
    assert not AzureStorage(f"{uri}-none", _options(blob_url)).has_log_files()
    # deltalake (object_store) reads it with the emulator settings from its environment
    monkeypatch.setenv("AZURE_STORAGE_USE_EMULATOR", "true")
    monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", blob_url)
    seen = oracle_read.read(uri)
    assert seen["version"] == 3 and seen["rows"] == 2


def test_abfss_uri_and_the_emulator_option(blob_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """abfss://container@account.dfs.core.windows.net/path with use_emulator, as object_store
    users write it against Azurite."""
    monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", blob_url)
    uri = f"abfss://{CONTAINER}@{EMULATOR_ACCOUNT}.dfs.core.windows.net/e-{uuid.uuid4().hex[:8]}"
    table = Table.create(uri, SCHEMA, storage_options={"azure_storage_use_emulator": "true"})
    table.append(_batch([7]))
    reread = Table.open(uri, {"use_emulator": "1"}).snapshot()
    assert reread.version == 1 and reread.num_files == 1


def test_put_if_absent_and_a_lost_answer(blob_url: str) -> None:
    _, table = _new_table(blob_url)
    storage = table.storage
    name = f"_delta_log/{1:020d}.json"
    storage.write_if_absent(name, b'{"commitInfo":{"txnId":"a"}}\n')
    # the same bytes again: our own PUT answered by a retry after a lost response
    storage.write_if_absent(name, b'{"commitInfo":{"txnId":"a"}}\n')
    with pytest.raises(FileExistsInStoreError):
        storage.write_if_absent(name, b'{"commitInfo":{"txnId":"b"}}\n')
    assert storage.read(name) == b'{"commitInfo":{"txnId":"a"}}\n'
    with pytest.raises(FileNotFoundError):
        storage.read("_delta_log/missing.json")
    storage.delete("_delta_log/missing.json")  # a missing blob is fine


def test_two_processes_racing_for_one_version(blob_url: str, tmp_path: Path) -> None:
    uri, table = _new_table(blob_url)
    table.append(_batch([0]))
    results = race_two_processes(uri, _options(blob_url), tmp_path / "go", timeout=120)
    assert sorted(r["version"] for r in results) == [2, 3]
    assert sorted(r["attempts"] for r in results) == [1, 2]  # the loser retried once
    assert _commit_names(table) == [f"{v:020d}.json" for v in range(4)]
    assert Table.open(uri, _options(blob_url)).snapshot().num_files == 3


def test_vacuum_and_the_command_line_on_azure(
    blob_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from txntable.cli.main import main as cli
    from txntable.engine.vacuum import vacuum

    uri, table = _new_table(blob_url)
    table.append(_batch([1, 2], "a"))
    table.storage.write("p=a/orphan.parquet", b"x")
    snapshot = Table.open(uri, _options(blob_url)).snapshot()
    assert vacuum(snapshot, retention_ms=0, force=True).num_deleted == 1
    names = {f.name for f in table.storage.list_tree()}
    assert "p=a/orphan.parquet" not in names and any(n.startswith("_delta_log/") for n in names)
    flags = [a for k, v in _options(blob_url).items() for a in ("--storage-option", f"{k}={v}")]
    assert cli(["inspect", uri, "--json", *flags]) == 0
    latest = Table.open(uri, _options(blob_url)).snapshot().version  # VACUUM logs its commits
    assert json.loads(capsys.readouterr().out)["version"] == latest >= 1


def test_bad_azure_options_and_credentials_fail_clearly(blob_url: str) -> None:
    with pytest.raises(InvalidArgumentError, match="unknown Azure storage option AZURE_NOPE"):
        open_storage(f"az://{CONTAINER}/t", {"AZURE_NOPE": "1"})
    with pytest.raises(InvalidArgumentError, match="names no storage account"):
        open_storage(f"az://{CONTAINER}/t", {"AZURE_STORAGE_ACCOUNT_KEY": EMULATOR_KEY})
    with pytest.raises(InvalidArgumentError, match="plain http://"):
        open_storage(
            f"az://{CONTAINER}/t",
            {"account_name": EMULATOR_ACCOUNT, "endpoint": f"{blob_url}/{EMULATOR_ACCOUNT}"},
        )
    wrong_key = _options(blob_url) | {"AZURE_STORAGE_ACCOUNT_KEY": "d3Jvbmcta2V5LXZhbHVl"}
    with pytest.raises(StorageError, match="permission denied") as info:
        Table.open(f"az://{CONTAINER}/t", wrong_key)
    assert "d3Jvbmcta2V5LXZhbHVl" not in str(info.value)


@pytest.mark.spark
def test_spark_checkpoint_and_vacuum_on_azure(
    blob_url: str, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Spark checkpoint job's replay and VACUUM's Spark tasks reach Azure through the
    engine's storage (Spark has no Azure filesystem here, and VACUUM on Spark once refused Azure
    tables): the same state as our replay, the same files deleted as in-process."""

    from tests.support.checkpoint_interop import assert_replays_on_object_store
    from txntable.engine.vacuum import vacuum
    from txntable.maintenance.vacuum_spark import SparkSweeper

    uri, _ = _new_table(blob_url)
    assert_replays_on_object_store(spark, uri, _options(blob_url), _batch)
    monkeypatch.setenv("AZURE_STORAGE_USE_EMULATOR", "true")
    monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", blob_url)
    seen = oracle_read.read(uri)
    assert (seen["version"], seen["rows"]) == (4, 2)

    table = Table.open(uri, _options(blob_url))
    for name in ("orphan-root.parquet", "p=a/orphan.parquet", "p=a/_tmp/x.parquet", "_hidden/y"):
        table.storage.write(name, b"x")
    later = int(time.time() * 1000) + 8 * 86_400_000  # the tombstone and orphans are old then
    snapshot = table.snapshot()
    process = vacuum(snapshot, dry_run=True, now_ms=later)
    sweeper = SparkSweeper(spark=spark, storage_options=_options(blob_url))
    assert vacuum(snapshot, dry_run=True, now_ms=later, sweeper=sweeper).files == process.files
    assert {"orphan-root.parquet", "p=a/orphan.parquet"} < set(process.files)
    assert sweeper.last["directories"] == 2  # p=a and p=b; _hidden is skipped
    done = vacuum(snapshot, now_ms=later, sweeper=sweeper)
    assert done.num_deleted == len(process.files) and done.logged
    names = {f.name for f in table.storage.list_tree()}
    assert not names & set(process.files) and {"p=a/_tmp/x.parquet", "_hidden/y"} <= names
    assert oracle_read.read(uri)["rows"] == 2


def test_a_data_files_footer_is_read_from_its_last_bytes(blob_url: str) -> None:
    """Issue 33.3: OPTIMIZE counts the rows of a file without ``numRecords`` from its footer: the
    blob's size, then its last bytes only (Blob storage has no suffix range)."""
    from txntable.engine.read.data_files import read_footer

    _uri, table = _new_table(blob_url)
    table.append(_batch(list(range(500))))
    add = next(table.snapshot().add_actions())
    storage = table.storage
    whole = storage.read(add.path)
    assert storage.read_tail(add.path, 8) == whole[-8:] and whole.endswith(b"PAR1")
    assert storage.read_tail(add.path, len(whole) + 100) == whole
    assert read_footer(storage, add.path).num_rows == 500
    with pytest.raises(FileNotFoundError):
        storage.read_tail("gone.parquet", 8)
