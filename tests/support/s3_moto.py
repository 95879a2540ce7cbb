"""A bucket on moto's S3 server (the endpoint fixture) and tables in it, for the S3 tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest

from tests.integration.concurrent_writers import SCHEMA
from tests.integration.moto_support import moto_server
from txntable.engine.storage.s3 import S3Storage
from txntable.engine.table import Table

BUCKET = "txntable-tests"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with moto_server() as url:
        S3Storage(f"s3://{BUCKET}", _options(url)).client.create_bucket(Bucket=BUCKET)
        yield url


def _options(url: str) -> dict[str, str]:
    return {"endpoint_url": url, "key": "test", "secret": "test", "region": "us-east-1"}


def _new_table(endpoint: str) -> tuple[str, Table]:
    uri = f"s3://{BUCKET}/t-{uuid.uuid4().hex[:8]}"
    table = Table.create(uri, SCHEMA, partition_by=["p"], storage_options=_options(endpoint))
    return uri, table


def _batch(ids: list[int], part: str = "a") -> pa.Table:
    return pa.table({"id": ids, "writer": ["t"] * len(ids), "p": [part] * len(ids)}, schema=SCHEMA)
