"""Actions: exact JSON round trip on every real commit line, and clear errors on bad lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import TESTDATA
from tests.unit.case_ids import readable
from txntable.engine.errors import CorruptLogError, InvalidActionError
from txntable.engine.model.actions import (
    AddFile,
    CommitInfo,
    DeletionVector,
    Metadata,
    Protocol,
    RemoveFile,
    parse_action,
    parse_commit,
    serialize_commit,
)


def _log_json_files() -> list[Path]:
    """Every commit file and JSON V2 checkpoint of the reference tables."""
    return sorted(TESTDATA.glob("*/_delta_log/*.json"))


def test_reference_tables_have_commit_files() -> None:
    assert len(_log_json_files()) > 40


@pytest.mark.parametrize(
    "path", _log_json_files(), ids=lambda p: f"{p.parent.parent.name}/{p.name}"
)
def test_every_reference_action_round_trips_exactly(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    lines = [line for line in text.split("\n") if line.strip()]
    actions = parse_commit(text, source=path.name)
    recognised = 0
    for line in lines:
        obj = json.loads(line)
        action = parse_action(obj)
        if action is None:
            continue
        recognised += 1
        ((key, body),) = obj.items()
        assert key == action.KEY
        assert action.to_json() == body
        assert json.loads(action.to_line()) == obj
        assert parse_action(json.loads(action.to_line())) == action
    assert len(actions) == recognised
    # serialising and parsing again gives equal actions and equal JSON
    again = parse_commit(serialize_commit(actions))
    assert again == actions
    assert [a.to_json() for a in again] == [a.to_json() for a in actions]


def test_unknown_fields_and_explicit_nulls_survive_a_round_trip() -> None:
    body = {
        "path": "a.parquet",
        "partitionValues": {"p": None},
        "size": 1,
        "modificationTime": 2,
        "dataChange": True,
        "stats": None,
        "futureField": {"nested": [1, 2, {"x": None}]},
    }
    action = parse_action({"add": body})
    assert isinstance(action, AddFile)
    assert action.stats is None
    assert action.extra["futureField"] == body["futureField"]
    assert action.to_json() == body
    removed = action.to_remove(deletion_timestamp=5, data_change=False)
    assert removed.path == "a.parquet"
    assert removed.partition_values == {"p": None}
    assert (removed.size, removed.deletion_timestamp, removed.data_change) == (1, 5, False)


def test_unknown_action_types_are_ignored() -> None:
    text = "\n".join(
        [
            json.dumps({"commitInfo": {"operation": "WRITE", "deep": {"a": [1, {"b": None}]}}}),
            json.dumps({"someFutureAction": {"x": 1}}),
            json.dumps(
                {
                    "add": {
                        "path": "a",
                        "partitionValues": {},
                        "size": 1,
                        "modificationTime": 1,
                        "dataChange": True,
                    }
                }
            ),
        ]
    )
    actions = parse_commit(text)
    assert [type(a) for a in actions] == [CommitInfo, AddFile]
    info = actions[0]
    assert isinstance(info, CommitInfo)
    assert info.data["deep"] == {"a": [1, {"b": None}]}


def test_commit_without_trailing_newline_and_with_blank_lines() -> None:
    add = {
        "add": {
            "path": "a",
            "partitionValues": {},
            "size": 1,
            "modificationTime": 1,
            "dataChange": True,
        }
    }
    lines = [
        json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}),
        json.dumps(add),
    ]
    with_newline = parse_commit("\n".join(lines) + "\n")
    assert parse_commit("\n".join(lines)) == with_newline
    assert parse_commit("\n\n".join(lines) + "\n\n") == with_newline
    assert parse_commit("\r\n".join(lines) + "\r\n") == with_newline


def test_serialize_commit_ends_every_line_with_newline() -> None:
    actions = [Protocol(1, 2), CommitInfo({"operation": "WRITE"})]
    data = serialize_commit(actions)
    assert data.endswith(b"\n")
    assert data.count(b"\n") == 2
    assert b" " not in data  # compact separators


def test_non_ascii_is_written_raw() -> None:
    action = parse_action(
        {
            "add": {
                "path": "s=日本/a",
                "partitionValues": {"s": "日本"},
                "size": 1,
                "modificationTime": 1,
                "dataChange": True,
            }
        }
    )
    assert action is not None
    assert "日本" in action.to_line()


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("{not json", "line 2 is not valid JSON"),
        ("[1, 2]", "line 2"),
        ('{"add": {"path": "x"}, "remove": {"path": "x"}}', "line 2"),
        ('{"add": {"path": "x"}}', "lacks required field"),
        ('{"add": "nope"}', "not a JSON object"),
        (
            '{"add": {"path": "x", "partitionValues": {}, "size": "big", "modificationTime": 1,'
            ' "dataChange": true}}',
            "size",
        ),
        (
            '{"add": {"path": 5, "partitionValues": {}, "size": 1, "modificationTime": 1,'
            ' "dataChange": true}}',
            "path",
        ),
        (
            '{"add": {"path": "x", "partitionValues": [], "size": 1, "modificationTime": 1,'
            ' "dataChange": true}}',
            "partitionValues",
        ),
        (
            '{"add": {"path": "x", "partitionValues": {"p": 1}, "size": 1, "modificationTime": 1,'
            ' "dataChange": true}}',
            "partitionValues",
        ),
        (
            '{"add": {"path": "x", "partitionValues": {}, "size": true, "modificationTime": 1,'
            ' "dataChange": true}}',
            "size",
        ),
        ('{"protocol": {"minReaderVersion": "1", "minWriterVersion": 2}}', "minReaderVersion"),
        (
            '{"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": "x"}}',
            "readerFeatures",
        ),
        ('{"metaData": {"id": "x", "schemaString": "{}", "configuration": []}}', "configuration"),
        ('{"remove": {"path": "x", "dataChange": "yes"}}', "dataChange"),
        ('{"txn": {"appId": "a", "version": 1.5}}', "version"),
    ],
    ids=readable,
)
def test_invalid_lines_name_the_file_and_line(line: str, fragment: str) -> None:
    good = json.dumps({"commitInfo": {"operation": "WRITE"}})
    with pytest.raises(InvalidActionError) as info:
        parse_commit(f"{good}\n{line}\n", source="_delta_log/00000000000000000007.json")
    message = str(info.value)
    assert "00000000000000000007.json" in message
    assert fragment in message
    assert isinstance(info.value, CorruptLogError)


def test_invalid_utf8_is_a_corrupt_log_error() -> None:
    with pytest.raises(InvalidActionError, match=r"00000000000000000001\.json.*UTF-8"):
        parse_commit(b'{"commitInfo":{}}\n\xff\xfe\n', source="00000000000000000001.json")


def test_deletion_vector_unique_id_follows_spark() -> None:
    with_offset = DeletionVector.from_json(
        {
            "storageType": "u",
            "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
            "offset": 4,
            "sizeInBytes": 40,
            "cardinality": 6,
        }
    )
    assert with_offset.unique_id == "uab^-aqEH.-t@S}K{vb[*k^@4"
    inline = DeletionVector.from_json(
        {
            "storageType": "i",
            "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
            "sizeInBytes": 40,
            "cardinality": 6,
        }
    )
    assert inline.unique_id == "iwi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"
    add = AddFile(path="p", deletion_vector=with_offset)
    assert add.key == ("p", with_offset.unique_id)
    assert add.to_remove(1, True).key == add.key
    assert RemoveFile(path="p").key == ("p", None)


def test_metadata_defaults_are_a_valid_action() -> None:
    meta = Metadata(id="x", schema_string='{"type":"struct","fields":[]}')
    assert meta.to_json()["format"] == {"provider": "parquet", "options": {}}
    assert parse_action({"metaData": meta.to_json()}) == meta
