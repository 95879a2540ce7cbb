"""S3 event notifications through SQS: one long-polling reader per queue, routing to tables.

A bucket sends ``s3:ObjectCreated`` notifications for its tables' ``_delta_log/`` prefixes to an
SQS queue (docs/observation.md shows the bucket configuration); every TxnTable that names the
queue in ``spec.notifications.sqsQueueUrl`` is served by the one reader of that queue, which
matches each record's bucket and key against the tables' log prefixes, signals the tables whose
commit files (``<20 digits>.json``) appeared and deletes the messages it read. Messages about
other objects (data files, checkpoints, S3's test event) are deleted without a signal: the
queue exists for this controller.

Idle, a reader makes one ``ReceiveMessage`` call per ``WAIT_SECONDS`` (long polling), whatever
the number of tables behind it. A failing queue (no such queue, denied, unreachable) marks the
reader unhealthy with the error, which puts its tables in polling mode in their status, and is
retried with a growing pause; the tables' polling timer keeps observing them meanwhile.

The client is built from the table's storage options and Secret, as its ``S3Storage`` is
(``engine.storage.options``), except the endpoint, which is the queue URL's own host (an S3
endpoint such as MinIO usually serves no SQS), and the region, which the AWS host names when
the options do not.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote_plus, urlsplit

from txntable.api.table import EventSource
from txntable.engine import LOG_DIR, parse_s3_options, parse_s3_uri, s3_options_with_environment

log = logging.getLogger(__name__)

#: Long-poll wait of one ReceiveMessage call (SQS's maximum).
WAIT_SECONDS = 20
#: Pauses after consecutive failures (seconds), the last one repeated.
RETRY_PAUSES = (1.0, 5.0, 15.0, 60.0)
_AWS_HOST = re.compile(r"^sqs[.-]([a-z0-9-]+)\.amazonaws\.com")

Signal = Callable[[str, EventSource], None]
#: Twenty digits and ``.json``: a commit file (checkpoints and CRCs do not wake anyone).
COMMIT_NAME = re.compile(r"^\d{20}\.json$")


class SqsLike:
    """What ``CommitEvents`` needs of a queue reader (``SqsQueue``)."""

    healthy: bool = False
    error: str | None = None

    def start(self, signal: Signal) -> None:
        raise NotImplementedError

    def route(self, key: str, location: str, options: Mapping[str, str]) -> None:
        raise NotImplementedError

    def unroute(self, key: str) -> int:
        """Stop routing to ``key``; returns how many tables still read this queue."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class SqsQueue(SqsLike):
    """The reader of one queue; ``route`` says which table a log prefix belongs to."""

    def __init__(
        self, queue_url: str, options: Mapping[str, str], *, wait_seconds: int = WAIT_SECONDS
    ) -> None:
        self.queue_url = queue_url
        self.wait_seconds = wait_seconds
        self.healthy = False
        self.error: str | None = None
        #: ReceiveMessage and DeleteMessageBatch calls made (the benchmark reads them)
        self.requests = 0
        self._options = dict(options)
        self._client: Any = None
        self._routes: dict[str, tuple[str, str]] = {}  # key -> (bucket, log prefix)
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._signal: Signal | None = None

    def start(self, signal: Signal) -> None:
        self._signal = signal
        self._thread = threading.Thread(target=self._loop, name="sqs-commit-events", daemon=True)
        self._thread.start()

    def route(self, key: str, location: str, options: Mapping[str, str]) -> None:
        bucket, prefix = parse_s3_uri(location)
        log_prefix = f"{prefix}/{LOG_DIR}/" if prefix else f"{LOG_DIR}/"
        with self._lock:
            self._routes[key] = (bucket, log_prefix)
            if dict(options) != self._options:  # new credentials: a new client next call
                self._options, self._client = dict(options), None

    def unroute(self, key: str) -> int:
        with self._lock:
            self._routes.pop(key, None)
            return len(self._routes)

    def close(self) -> None:
        """Stop reading; the thread ends after the receive in flight (never waited for here:
        a handler that drops the last table of a queue must not block for a long poll)."""
        self._stopped.set()

    # -- reading -------------------------------------------------------------------------------
    def _loop(self) -> None:
        failures = 0
        while not self._stopped.is_set():
            try:
                self.receive_once()
                failures = 0
            except Exception as exc:  # botocore errors, bad credentials, a wrong URL
                self.healthy = False
                self.error = _describe(exc)
                pause = RETRY_PAUSES[min(failures, len(RETRY_PAUSES) - 1)]
                failures += 1
                log.warning("SQS queue %s failing (%s): polling its tables", self.queue_url, exc)
                with self._lock:
                    self._client = None  # build it again: credentials may have changed
                self._stopped.wait(pause)

    def receive_once(self) -> int:
        """One long-polling receive; signals tables and deletes the messages. Returns the
        number of commit events found."""
        client = self._get_client()
        self.requests += 1
        answer = client.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=self.wait_seconds,
        )
        self.healthy, self.error = True, None
        messages = answer.get("Messages") or []
        found = 0
        for message in messages:
            for key in self._tables_of(message.get("Body") or ""):
                found += 1
                if self._signal is not None:
                    self._signal(key, EventSource.SQS)
        if messages:
            self.requests += 1
            client.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(messages)
                ],
            )
        return found

    def _tables_of(self, body: str) -> set[str]:
        """The tables one notification message names a new commit file of."""
        try:
            doc = json.loads(body)
        except ValueError:
            return set()
        if isinstance(doc, dict) and isinstance(doc.get("Message"), str):
            try:  # delivered through SNS: the S3 event is the message inside
                doc = json.loads(doc["Message"])
            except ValueError:
                return set()
        records = doc.get("Records") if isinstance(doc, dict) else None
        with self._lock:
            routes = list(self._routes.items())
        out: set[str] = set()
        for record in records if isinstance(records, list) else ():
            s3 = record.get("s3") if isinstance(record, dict) else None
            if not isinstance(s3, dict) or not str(record.get("eventName", "")).startswith(
                "ObjectCreated"
            ):
                continue
            bucket = (s3.get("bucket") or {}).get("name")
            object_key = unquote_plus(str((s3.get("object") or {}).get("key", "")))
            for table_key, (table_bucket, log_prefix) in routes:
                if bucket != table_bucket or not object_key.startswith(log_prefix):
                    continue
                if COMMIT_NAME.match(object_key[len(log_prefix) :]):
                    out.add(table_key)
        return out

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = sqs_client(self.queue_url, self._options, self.wait_seconds)
            return self._client


def sqs_client(queue_url: str, options: Mapping[str, str], wait_seconds: int) -> Any:
    """A boto3 SQS client for ``queue_url`` with the credentials of the table's options."""
    import boto3
    from botocore.config import Config

    settings = parse_s3_options(s3_options_with_environment(options))
    parts = urlsplit(queue_url)
    region = settings.client.get("region_name")
    matched = _AWS_HOST.match(parts.netloc)
    if matched:
        region = matched.group(1)
    session = boto3.session.Session(**settings.session)
    client_args: dict[str, Any] = {
        "endpoint_url": f"{parts.scheme}://{parts.netloc}",
        "region_name": region or "us-east-1",
    }
    if "verify" in settings.client:
        client_args["verify"] = settings.client["verify"]
    config = Config(
        connect_timeout=10,
        read_timeout=wait_seconds + 10,
        retries={"mode": "standard", "max_attempts": 3},
    )
    return session.client("sqs", config=config, **client_args)


def _describe(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        error = response.get("Error") or {}
        code, message = error.get("Code"), error.get("Message")
        if code:
            return f"{code}: {message}" if message else str(code)
    return f"{type(exc).__name__}: {exc}"[:512]
