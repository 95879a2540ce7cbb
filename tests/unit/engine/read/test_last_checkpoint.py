"""The ``_last_checkpoint`` hint: Delta's JSON checksum, and defensive parsing."""

from __future__ import annotations

import json

import pytest

from tests.conftest import TESTDATA
from txntable.engine.read import last_checkpoint
from txntable.engine.read.last_checkpoint import checksum, parse, render

# PROTOCOL.md, section "JSON checksum": the worked example and its checksum.
PROTOCOL_EXAMPLE = (
    '{"k0":"\'v 0\'", "checksum": "adsaskfljadfkjadfkj", "k1":{"k2": 2, "k3": ["v3", [1, 2], '
    '{"k4": "v4", "k5": ["v5", "v6", "v7"]}]}}'
)


def test_protocol_example_vector() -> None:
    assert checksum(json.loads(PROTOCOL_EXAMPLE)) == "6a92d155a59bf2eecbd4b4ec7fd1f875"


def test_spark_written_hint_of_the_v2_checkpoint_table_verifies() -> None:
    data = (TESTDATA / "checkpoint-v2-table" / "_delta_log" / "_last_checkpoint").read_bytes()
    obj = json.loads(data)
    assert checksum(obj) == obj["checksum"] == "c7c089e999e9dd02ca5c847d9b1380d3"
    hint = parse(data)
    assert hint is not None
    assert (hint.version, hint.size, hint.parts) == (8, 11, None)
    assert "v2Checkpoint" in hint.raw


def test_checksum_encodes_reserved_bytes_in_uppercase_hex() -> None:
    # Delta's own unit test: every printable reserved character and a non-ASCII one.
    import hashlib

    value = "abcXYZ019%'`~!@#$%^&*()_+-={[}]|\\;:'\"/?.>,<"
    expected = (
        '"k0"="normal","k1"="abcXYZ019%25%27%60~%21%40%23%24%25%5E%26%2A%28%29_%2B-%3D%7B%5B%7D'
        '%5D%7C%5C%3B%3A%27%22%2F%3F.%3E%2C%3C"'
    )
    assert checksum({"k0": "normal", "k1": value}) == hashlib.md5(expected.encode()).hexdigest()
    euro = '"k0"="normal","k1"="a%E2%82%AC%2B"'
    assert checksum({"k0": "normal", "k1": "a€+"}) == hashlib.md5(euro.encode()).hexdigest()


def test_checksum_ignores_only_the_top_level_checksum_and_key_order() -> None:
    a = {"version": 3, "size": 4, "checksum": "x", "tags": {"checksum": "kept"}}
    b = {"tags": {"checksum": "kept"}, "size": 4, "version": 3}
    assert checksum(a) == checksum(b)
    assert checksum(a) != checksum({"version": 3, "size": 4, "tags": {}})


def test_render_puts_version_size_parts_first_and_verifies() -> None:
    data = render({"sizeInBytes": 10, "parts": 2, "size": 7, "version": 12})
    obj = json.loads(data)
    assert list(obj)[:3] == ["version", "size", "parts"]
    assert list(obj)[-1] == "checksum"
    hint = parse(data)
    assert hint is not None
    assert (hint.version, hint.size, hint.parts) == (12, 7, 2)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b'{"version": 3, "size"',  # truncated by a non-atomic overwrite
        b"[3]",
        b'{"size": 3}',
        b'{"version": -1, "size": 3}',
        b'{"version": "3", "size": 3}',
        b'{"version": true, "size": 3}',
        b'{"version": 3, "version": 4, "size": 3}',  # duplicate keys are invalid
        b'{"version": 3, "size": 3, "parts": 0}',
        b'{"version": 3, "size": 3, "checksum": "00000000000000000000000000000000"}',
        b'{"version": 3, "size": 3, "checkpointType": "AMT"}',
        b"\xff\xfe",
    ],
)
def test_unusable_hints_are_treated_as_absent(data: bytes) -> None:
    assert parse(data) is None


def test_hint_with_unknown_fields_and_no_checksum_is_used() -> None:
    hint = parse(b'{"version":3,"size":5,"parts":null,"futureField":{"a":[1]}}')
    assert hint is not None
    assert (hint.version, hint.size, hint.parts) == (3, 5, None)


def test_checksum_mismatch_after_edit_is_detected() -> None:
    good = json.loads(render({"version": 3, "size": 5}))
    good["version"] = 4
    assert parse(json.dumps(good).encode()) is None


def test_reference_hints_parse() -> None:
    versions = {}
    for path in sorted(TESTDATA.glob("*/_delta_log/_last_checkpoint")):
        hint = last_checkpoint.parse(path.read_bytes())
        assert hint is not None, path
        versions[path.parent.parent.name] = hint.version
    assert versions["simple_table_with_checkpoint"] == 10
    assert versions["checkpoint_with_partitions"] == 2
