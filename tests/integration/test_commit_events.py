"""Commit events on real parts: the LogProbe on real files, S3 -> SQS through moto's server.

The probe sees commits a real writer (the engine) makes on local disk; a burst of commits is one
wake-up after the debounce; the S3 notifications moto delivers to an SQS queue wake exactly the
table whose log grew; a queue that cannot be read leaves the table in polling mode, with the
reason in its status. Waits are bounded loops on the observable result, never timing asserts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
import pytest

from tests.integration.moto_support import moto_server
from tests.support.manifests import compaction_policy_manifest, table_manifest
from txntable.api.table import EventSource, ObservationMode
from txntable.engine.table import Table
from txntable.handlers.commit_events import CommitEvents
from txntable.handlers.sqs_source import SqsQueue

pytestmark = pytest.mark.integration

SCHEMA = pa.schema([("id", pa.int64())])
BUCKET = "txntable-events"


def _append(table: Table, n: int = 1) -> None:
    for i in range(n):
        table.append(pa.table({"id": [i]}, schema=SCHEMA))


class Woken:
    """Collects wake-ups from the debounce thread."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.cond = threading.Condition()

    def __call__(self, key: str) -> None:
        with self.cond:
            self.keys.append(key)
            self.cond.notify_all()

    def wait_for(self, count: int, timeout: float = 30.0) -> list[str]:
        with self.cond:
            self.cond.wait_for(lambda: len(self.keys) >= count, timeout=timeout)
            return list(self.keys)


def test_probe_finds_commits_a_writer_makes_on_disk(tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), SCHEMA)
    woken = Woken()
    events = CommitEvents(woken, probe_interval=0, debounce=0)
    events.watch("ns/t", str(tmp_path / "t"), version=0)
    assert events.probe_once() == []  # nothing after version 0 yet
    _append(table, 3)
    assert events.probe_once() == ["ns/t"]
    assert events.stats.found == 3  # walked v1..v3 in one round
    assert events.probe_once() == []  # the cursor moved past them
    # an observation that reports an older version (it ran before the commits) re-arms it
    events.watch("ns/t", str(tmp_path / "t"), version=1)
    assert events.probe_once() == ["ns/t"]


def test_more_tables_than_a_rounds_budget_are_probed_in_turn(tmp_path: Path) -> None:
    """A round checks at most ``probe_budget`` tables, the next ones at the next round: every
    table is checked within ceil(tables / budget) rounds, and none is checked twice before
    every other one was checked once."""
    woken = Woken()
    events = CommitEvents(woken, probe_interval=1.0, probe_budget=3, debounce=0)  # by hand
    tables = {f"ns/t{i}": Table.create(str(tmp_path / f"t{i}"), SCHEMA) for i in range(7)}
    for key in tables:
        events.watch(key, str(tmp_path / key.split("/")[1]), version=0)
    for table in tables.values():
        _append(table)
    found = [events.probe_once() for _ in range(3)]
    assert [len(hits) for hits in found] == [3, 3, 1]
    assert sorted(k for hits in found for k in hits) == sorted(tables)
    assert events.stats.probes == 7 * 2 + 2  # each hit is 2 checks; round 3 wraps to t0, t1
    assert "3 tables a round" in events.status("ns/t0").message


def test_file_uri_and_unknown_version(tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), SCHEMA)
    _append(table)
    events = CommitEvents(Woken(), probe_interval=1.0, debounce=0)  # not started: rounds by hand
    events.watch("k", (tmp_path / "t").as_uri())  # version unknown: nothing to look past
    assert events.probe_once() == []
    events.watch("k", (tmp_path / "t").as_uri(), version=0)
    assert events.probe_once() == ["k"]
    status = events.status("k")
    assert (status.mode, status.source) == (ObservationMode.EVENTS, EventSource.LOG_PROBE)


def test_a_burst_of_commits_is_one_wake_up(tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), SCHEMA)
    woken = Woken()
    events = CommitEvents(woken, probe_interval=0.05, debounce=0.5).start()
    try:
        events.watch("ns/t", str(tmp_path / "t"), version=0)
        _append(table, 50)  # slower than the probe: many events, one wake-up
        assert woken.wait_for(1) == ["ns/t"]
        assert events.stats.events["LogProbe"] >= 1
        assert events.stats.found == 50
        assert woken.keys == ["ns/t"]
    finally:
        events.close()


def test_unwatched_and_disabled_tables_are_polled(tmp_path: Path) -> None:
    events = CommitEvents(Woken(), probe_interval=0, debounce=0)
    assert events.status("nope").mode is ObservationMode.POLLING
    events.watch("s3t", "s3://bucket/t")
    status = events.status("s3t")
    assert status.mode is ObservationMode.POLLING
    assert "sqsQueueUrl is unset" in (status.message or "")
    events.watch("local", str(tmp_path))
    assert "PROBE_INTERVAL_SECONDS=0" in (events.status("local").message or "")


# -- S3 -> SQS through moto's server --------------------------------------------------------


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


def _options(url: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": url,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }


def _clients(url: str) -> tuple[Any, Any]:
    kw = {
        "endpoint_url": url,
        "aws_access_key_id": "test",
        "aws_secret_access_key": "test",
        "region_name": "us-east-1",
    }
    return boto3.client("s3", **kw), boto3.client("sqs", **kw)


@pytest.fixture(scope="module")
def queue(endpoint: str) -> str:
    """A bucket whose ``_delta_log`` commits notify an SQS queue, as docs/observation.md says."""
    s3, sqs = _clients(endpoint)
    s3.create_bucket(Bucket=BUCKET)
    url = sqs.create_queue(QueueName="txntable-commits")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    s3.put_bucket_notification_configuration(
        Bucket=BUCKET,
        NotificationConfiguration={
            "QueueConfigurations": [
                {
                    "QueueArn": arn,
                    "Events": ["s3:ObjectCreated:*"],
                    "Filter": {"Key": {"FilterRules": [{"Name": "suffix", "Value": ".json"}]}},
                }
            ]
        },
    )
    return str(url)


def test_s3_notifications_wake_the_table_whose_log_grew(endpoint: str, queue: str) -> None:
    options = _options(endpoint)
    one = Table.create(f"s3://{BUCKET}/one", SCHEMA, storage_options=options)
    two = Table.create(f"s3://{BUCKET}/one-two", SCHEMA, storage_options=options)
    reader = SqsQueue(queue, options, wait_seconds=1)
    seen: list[tuple[str, EventSource]] = []
    reader._signal = lambda key, source: seen.append((key, source))
    reader.route("ns/one", f"s3://{BUCKET}/one", options)
    reader.route("ns/two", f"s3://{BUCKET}/one-two", options)
    for _ in range(5):  # drain the creates and S3's test event
        reader.receive_once()
    seen.clear()
    _append(one, 2)
    found = sum(reader.receive_once() for _ in range(3))
    assert found == 2  # two commit files of table one, none of table two
    assert {key for key, _ in seen} == {"ns/one"}
    assert reader.healthy and reader.error is None
    _append(two)
    assert sum(reader.receive_once() for _ in range(3)) == 1
    assert seen[-1] == ("ns/two", EventSource.SQS)
    assert reader.requests >= 6


def test_sqs_events_through_the_hub_are_debounced(endpoint: str, queue: str) -> None:
    options = _options(endpoint)
    table = Table.create(f"s3://{BUCKET}/hub", SCHEMA, storage_options=options)
    woken = Woken()
    events = CommitEvents(
        woken,
        probe_interval=0,
        debounce=0.5,
        sqs_factory=lambda url, opts: SqsQueue(url, opts, wait_seconds=1),
    ).start()
    try:
        events.watch("ns/hub", f"s3://{BUCKET}/hub", sqs_queue_url=queue, storage_options=options)
        for _ in range(100):  # the first receive makes the queue healthy
            if events.status("ns/hub").mode is ObservationMode.EVENTS:
                break
            time.sleep(0.1)
        status = events.status("ns/hub")
        assert (status.mode, status.source) == (ObservationMode.EVENTS, EventSource.SQS)
        _append(table, 5)
        assert "ns/hub" in woken.wait_for(1)
    finally:
        events.close()


def test_a_failing_queue_falls_back_to_polling(endpoint: str) -> None:
    options = _options(endpoint)
    missing = f"{endpoint}/123456789012/no-such-queue"
    events = CommitEvents(
        Woken(),
        probe_interval=0,
        debounce=0,
        sqs_factory=lambda url, opts: SqsQueue(url, opts, wait_seconds=1),
    ).start()
    try:
        events.watch("ns/x", f"s3://{BUCKET}/x", sqs_queue_url=missing, storage_options=options)
        status = events.status("ns/x")
        for _ in range(100):
            status = events.status("ns/x")
            if "not read yet" not in (status.message or ""):
                break
            time.sleep(0.1)
        assert status.mode is ObservationMode.POLLING
        assert "no-such-queue" in (status.message or "")
        assert "NonExistentQueue" in (status.message or "") or "QueueDoesNotExist" in (
            status.message or ""
        )
    finally:
        events.close()


# -- the local controller loop ---------------------------------------------------------------


def test_local_loop_compacts_after_a_burst_without_waiting_for_the_poll(tmp_path: Path) -> None:
    """With two minutes between polls, the LogProbe brings the second observation that sees
    the burst and launches compaction (a real local run, stopped afterwards); were it broken,
    the poll would, and no wake-up would be counted."""
    from txntable.api.policies import CompactionPolicy
    from txntable.api.table import TxnTable
    from txntable.cli.local_manifests import Manifests
    from txntable.cli.run_cmd import make_operator, reconcile_loop
    from txntable.config import Config
    from txntable.launch import LocalLauncher

    location = str(tmp_path / "t")
    table = Table.create(location, SCHEMA)
    manifests = Manifests(
        tables=[
            TxnTable.from_manifest(
                table_manifest(
                    "t",
                    location,
                    metadata={"uid": "u-t", "generation": 1},
                    compactionPolicyRef={"name": "p"},
                )
            )
        ],
        compaction=[
            CompactionPolicy.from_manifest(
                compaction_policy_manifest(
                    "p",
                    metadata={"uid": "u-p", "generation": 1},
                    minFileSize="8Mi",
                    minInputFiles=2,
                    triggers={"smallFiles": 10, "cooldown": "1s"},
                    spark={"backend": "Local"},
                )
            )
        ],
    )
    runs = tmp_path / "runs"
    operator = make_operator(runs, Config())
    events = CommitEvents(lambda _k: None, probe_interval=0.1, debounce=1.0).start()
    seen: list[Any] = []

    class LaunchedError(Exception):
        pass

    def on_tick(_table: TxnTable, tick: Any) -> None:
        seen.append(tick)
        if len(seen) == 1:  # after the first observation: the burst
            _append(table, 12)
        if tick.launched:
            raise LaunchedError

    try:
        with pytest.raises(LaunchedError):
            reconcile_loop(
                manifests, operator, once=False, interval=120, on_tick=on_tick, events=events
            )
    finally:
        events.close()
        for name in (n for t in seen for n in t.launched):
            LocalLauncher(runs).delete("default", name)
    assert seen[0].status.observation.mode is ObservationMode.EVENTS
    assert seen[0].status.observation.source is EventSource.LOG_PROBE
    assert seen[-1].launched and seen[-1].status.version == 12
    assert events.stats.wakeups >= 1  # the burst woke the table (once, unless it paused)
