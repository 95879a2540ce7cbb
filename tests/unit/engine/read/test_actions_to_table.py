"""``state.actions_to_table`` builds Arrow columns straight from action attributes; it must equal
the table built from each action's ``to_json`` object (the previous, obviously right, way)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.conftest import TESTDATA, reference_tables
from txntable.engine.model.actions import AddFile, DeletionVector, RemoveFile, parse_commit
from txntable.engine.read.state import ADD_SCHEMA, REMOVE_SCHEMA, actions_to_table


def _oracle(actions: list[AddFile | RemoveFile], schema: pa.Schema) -> pa.Table:
    if not actions:
        return schema.empty_table()
    rows = [a.to_json() for a in actions]
    return pa.Table.from_struct_array(pa.array(rows, type=pa.struct(list(schema))))


def _file_actions(table: str) -> tuple[list[AddFile], list[RemoveFile]]:
    adds: list[AddFile] = []
    removes: list[RemoveFile] = []
    for commit in sorted((TESTDATA / table / "_delta_log").glob("*.json")):
        if not commit.name[0].isdigit() or commit.name.count(".") != 1:
            continue
        for action in parse_commit(commit.read_bytes()):
            if isinstance(action, AddFile):
                adds.append(action)
            elif isinstance(action, RemoveFile):
                removes.append(action)
    return adds, removes


@pytest.mark.parametrize("table", reference_tables())
def test_equals_to_json_rows_on_reference_logs(table: str) -> None:
    adds, removes = _file_actions(table)
    assert actions_to_table(adds, ADD_SCHEMA).equals(_oracle(adds, ADD_SCHEMA))
    assert actions_to_table(removes, REMOVE_SCHEMA).equals(_oracle(removes, REMOVE_SCHEMA))


def test_extra_members_explicit_nulls_and_nested_vectors() -> None:
    dv = DeletionVector(
        storage_type="u", path_or_inline_dv="ab", offset=1, size_in_bytes=3, cardinality=2
    )
    adds = [
        AddFile(
            path="a",
            size=1,
            modification_time=2,
            deletion_vector=dv,
            extra={"tags": None, "unknownMember": 5},
        ),
        AddFile(path="b", size=1, modification_time=2, extra={"stats": '{"numRecords":1}'}),
        AddFile(
            path="c",
            partition_values={"p": None},
            size=3,
            modification_time=4,
            data_change=False,
            tags={"k": "v"},
            base_row_id=7,
        ),
    ]
    table = actions_to_table(adds, ADD_SCHEMA)
    assert table.equals(_oracle(adds, ADD_SCHEMA))
    assert table.column("stats").to_pylist() == [None, '{"numRecords":1}', None]
    assert table.column("deletionVector").to_pylist()[0]["pathOrInlineDv"] == "ab"
    mixed: list[AddFile | RemoveFile] = [adds[0], adds[0].to_remove(9, True)]
    assert actions_to_table(mixed, REMOVE_SCHEMA).equals(_oracle(mixed, REMOVE_SCHEMA))


def test_empty() -> None:
    assert actions_to_table([], ADD_SCHEMA).equals(ADD_SCHEMA.empty_table())
