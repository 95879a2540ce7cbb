"""Log file names and data-file path encoding (PROTOCOL.md "Delta Log Entries", "Add File and Remove
File")."""

from __future__ import annotations

import pytest

from txntable.engine.storage.paths import (
    HIVE_NULL,
    LogFileKind,
    classic_checkpoint_name,
    commit_name,
    decode_path,
    encode_path,
    has_scheme,
    hive_escape,
    listing_prefix,
    multipart_checkpoint_name,
    parse_log_name,
    partition_dir,
    relative_location,
)

V3 = "00000000000000000003"


@pytest.mark.parametrize(
    ("name", "kind", "version", "part", "parts"),
    [
        (f"{V3}.json", LogFileKind.COMMIT, 3, 0, 0),
        (f"{V3}.checkpoint.parquet", LogFileKind.CHECKPOINT_CLASSIC, 3, 0, 0),
        (
            f"{V3}.checkpoint.0000000002.0000000003.parquet",
            LogFileKind.CHECKPOINT_MULTIPART,
            3,
            2,
            3,
        ),
        (
            f"{V3}.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json",
            LogFileKind.CHECKPOINT_UUID,
            3,
            0,
            0,
        ),
        (
            f"{V3}.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.parquet",
            LogFileKind.CHECKPOINT_UUID,
            3,
            0,
            0,
        ),
        (f"{V3}.crc", LogFileKind.CRC, 3, 0, 0),
    ],
)
def test_log_names_are_classified(
    name: str, kind: LogFileKind, version: int, part: int, parts: int
) -> None:
    parsed = parse_log_name(name)
    assert parsed is not None
    assert (parsed.kind, parsed.version, parsed.part, parsed.num_parts) == (
        kind,
        version,
        part,
        parts,
    )


def test_compacted_name_has_both_versions() -> None:
    parsed = parse_log_name(f"{V3}.00000000000000000007.compacted.json")
    assert parsed is not None
    assert (parsed.kind, parsed.version, parsed.end_version) == (LogFileKind.COMPACTED, 3, 7)


@pytest.mark.parametrize(
    "name",
    [
        f".{V3}.json.0f3a6c1e-2b7c-4a51-9b7e-1f0d5d8c2a11.tmp",  # Spark rename-based stores
        "_commit_0f3a6c1e-2b7c-4a51-9b7e-1f0d5d8c2a11.json.tmp",  # delta-rs
        f"{V3}.json.0f3a6c1e.tmp",
        "_last_checkpoint",
        "foo.txt",
        "3.json",  # not 20 digits: junk, not version 3
        "0003.json",
        "000000000000000000003.json",  # 21 digits
        f"{V3}.JSON",
        f"{V3}.json.bak",
        f"{V3}.checkpoint.0000000003.0000000002.parquet",  # part > parts
        f"{V3}.checkpoint.0000000000.0000000002.parquet",  # part 0
        "",
    ],
)
def test_junk_names_are_ignored(name: str) -> None:
    assert parse_log_name(name) is None


def test_names_are_written_with_fixed_widths() -> None:
    assert commit_name(3) == f"{V3}.json"
    assert classic_checkpoint_name(3) == f"{V3}.checkpoint.parquet"
    assert multipart_checkpoint_name(3, 1, 2) == f"{V3}.checkpoint.0000000001.0000000002.parquet"
    assert parse_log_name(multipart_checkpoint_name(12, 2, 2)) is not None


def test_listing_prefix_sorts_every_file_of_a_version_at_or_after_it() -> None:
    names = sorted(
        [
            commit_name(9),
            commit_name(10),
            classic_checkpoint_name(10),
            f"{10:020d}.crc",
            commit_name(11),
            "_last_checkpoint",
        ]
    )
    after = [n for n in names if n >= listing_prefix(10)]
    assert after == [
        classic_checkpoint_name(10),
        f"{10:020d}.crc",
        commit_name(10),
        commit_name(11),
        "_last_checkpoint",
    ]


@pytest.mark.parametrize(
    ("raw", "decoded"),
    [
        ("a%20b/part.parquet", "a b/part.parquet"),
        ("c=1+1/part.parquet", "c=1+1/part.parquet"),  # '+' is a literal plus, never a space
        ("s=50%2525/x.parquet", "s=50%25/x.parquet"),  # decoded exactly once
        ("s=%E6%97%A5/x.parquet", "s=日/x.parquet"),
        ("s=日本/x.parquet", "s=日本/x.parquet"),
    ],
)
def test_decode_path_decodes_exactly_once(raw: str, decoded: str) -> None:
    assert decode_path(raw) == decoded


def test_spark_partition_path_example() -> None:
    # Spark: value "+ =%0" -> directory "c2=+ %3D%250" -> log path "c2=+%20%253D%25250/..."
    directory = partition_dir(["c2"], {"c2": "+ =%0"})
    assert directory == "c2=+ %3D%250"
    spark_log_path = "c2=+%20%253D%25250/part-0.parquet"
    assert decode_path(spark_log_path) == directory + "/part-0.parquet"
    # We encode '+' too (Spark leaves it); both spellings decode to the same file.
    ours = encode_path(directory + "/part-0.parquet")
    assert ours == "c2=%2B%20%253D%25250/part-0.parquet"
    assert decode_path(ours) == decode_path(spark_log_path)


@pytest.mark.parametrize("value", [v for v in [
    "a b", "x=y", "50%", "a/b", "c:d", "#h", "1+1", "q?", "é", "日本", "\\", "{}[]^", "'\"",
    " lead", "trail ", "\x01ctl", "x" * 300,
] if v])  # fmt: skip
def test_partition_directories_round_trip(value: str) -> None:
    directory = partition_dir(["col"], {"col": value})
    assert directory.count("/") == 0, "a value must never create a sub-directory"
    assert decode_path(encode_path(directory)) == directory
    name, _, escaped = directory.partition("=")
    assert name == "col"
    # Hive unescaping gives the value back
    out, i = [], 0
    while i < len(escaped):
        if escaped[i] == "%":
            out.append(chr(int(escaped[i + 1 : i + 3], 16)))
            i += 3
        else:
            out.append(escaped[i])
            i += 1
    assert "".join(out) == value


def test_null_and_empty_partition_values_use_the_hive_default() -> None:
    assert partition_dir(["a", "b"], {"a": None, "b": ""}) == f"a={HIVE_NULL}/b={HIVE_NULL}"
    assert partition_dir(["a"], {}) == f"a={HIVE_NULL}"


def test_hive_escape_leaves_space_and_non_ascii() -> None:
    assert hive_escape("a b/é:") == "a b%2Fé%3A"


@pytest.mark.parametrize(
    ("path", "absolute"),
    [
        ("s3://bucket/t/part.parquet", True),
        ("file:/tmp/t/part.parquet", True),
        ("file:///tmp/t/part.parquet", True),
        ("abfss://c@acct.dfs.core.windows.net/x.parquet", True),
        ("part-0.parquet", False),
        ("a=b:c/part.parquet", False),
        ("ts=2024-01-01%2012%253A00/part.parquet", False),
        ("/abs/no/scheme.parquet", False),
    ],
)
def test_has_scheme(path: str, absolute: bool) -> None:
    assert has_scheme(path) is absolute


@pytest.mark.parametrize(
    ("location", "root", "relative"),
    [
        # Iceberg names files by absolute location, never percent-encoded
        ("file:/t/a b/x%20y.parquet", "file:///t", "a b/x%20y.parquet"),
        ("file:///t/x", "file:///t", "x"),
        ("file://localhost/t/x", "file:///t", "x"),
        ("/t/x", "file:///t", "x"),
        ("file:/t/q?x#y", "file:///t", "q?x#y"),
        # Hadoop's s3a and s3n name the same objects as s3
        ("s3a://bucket/t/k/x.parquet", "s3://bucket/t", "k/x.parquet"),
        ("s3://bucket/t/x", "s3a://bucket/t", "x"),
        ("s3n://bucket/x", "s3://bucket", "x"),
        # Azure: ADLS and Blob spellings of one container; the account when both name one
        ("abfss://c@acct.dfs.core.windows.net/t/x", "az://c/t", "x"),
        ("wasbs://c@acct.blob.core.windows.net/t/x", "abfss://c@acct.dfs.core.windows.net/t", "x"),
        # outside the root
        ("abfss://c@other.dfs.core.windows.net/t/x", "abfss://c@acct.dfs.core.windows.net/t", None),
        ("file:/tx/x", "file:///t", None),
        ("file:/t", "file:///t", None),
        ("file:/t/../u/x", "file:///t", None),
        ("s3://other/t/x", "s3://bucket/t", None),
        ("gs://bucket/t/x", "s3://bucket/t", None),
        ("s3://bucket/t/x", "file:///t", None),
    ],
)
def test_relative_location(location: str, root: str, relative: str | None) -> None:
    assert relative_location(location, root) == relative
