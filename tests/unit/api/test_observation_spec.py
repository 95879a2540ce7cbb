"""spec.notifications and status.observation parse and render as the CRD describes them."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.manifests import table_manifest
from txntable.api.errors import InvalidSpecError
from txntable.api.table import (
    EventSource,
    ObservationMode,
    ObservationStatus,
    TxnTable,
    TxnTableStatus,
)


def _manifest(**spec: Any) -> dict[str, Any]:
    return table_manifest("t", "s3://bucket/t", **spec)


def test_a_queue_url_is_read() -> None:
    url = "https://sqs.eu-central-1.amazonaws.com/123456789012/lake-commits"
    table = TxnTable.from_manifest(_manifest(notifications={"sqsQueueUrl": url}))
    assert table.spec.notifications is not None
    assert table.spec.notifications.sqs_queue_url == url
    assert TxnTable.from_manifest(_manifest()).spec.notifications is None


@pytest.mark.parametrize(
    "bad", ["sqs.eu-central-1.amazonaws.com/1/q", "https://host-only", "https://h/q with space"]
)
def test_a_queue_url_that_is_not_one_is_refused(bad: str) -> None:
    with pytest.raises(InvalidSpecError, match="sqsQueueUrl"):
        TxnTable.from_manifest(_manifest(notifications={"sqsQueueUrl": bad}))


def test_observation_round_trips_through_the_status() -> None:
    status = TxnTableStatus(
        observation=ObservationStatus(
            mode=ObservationMode.EVENTS, source=EventSource.SQS, message="from q"
        )
    )
    rendered = status.to_status()
    assert rendered["observation"] == {"mode": "Events", "source": "SQS", "message": "from q"}
    assert TxnTableStatus.from_dict(rendered) == status
