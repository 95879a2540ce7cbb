"""The manifests ``txntable run --local`` reads (issue 23, item 17): an error is one readable
line (the value and what the field takes, never the field's regular expression: ~1,500
characters for ``61 * * * *``), every error of every file is reported, a name used twice in one
namespace is refused as the API server refuses the second ``create``, and one manifest file is
as good as a directory of them."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from txntable.cli.main import main
from txntable.engine import Table

POLICY = """apiVersion: txntable.io/v1alpha1
kind: CompactionPolicy
metadata: {name: nightly}
spec:
  triggers: {schedule: "61 * * * *"}
  targetFileSize: 12QQ
  maintenanceWindows: [{start: "25:00", end: "01:00"}]
"""
TABLE = """apiVersion: txntable.io/v1alpha1
kind: TxnTable
metadata: {{name: {name}, namespace: {namespace}}}
spec: {{location: {location}, observeInterval: {interval}}}
"""


def _table(name: str, location: Path, namespace: str = "default", interval: str = "1m") -> str:
    return TABLE.format(name=name, namespace=namespace, location=location, interval=interval)


def test_every_error_of_every_manifest_is_one_readable_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifests = tmp_path / "m"
    manifests.mkdir()
    (manifests / "policy.yaml").write_text(POLICY)
    (manifests / "table.yaml").write_text(_table("t", tmp_path / "t", interval="0s"))
    (manifests / "broken.yaml").write_text("kind: TxnTable\nmetadata: {name: [unclosed\n")
    assert main(["run", "--local", str(manifests), "--once"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    errors = [line for line in lines if line.startswith("invalid manifest: ")]
    assert len(errors) == 5 and len(lines) == 6, captured.err
    assert lines[-1].startswith("error: 5 manifest error(s)")
    said = "\n".join(errors)
    for expected in (
        "broken.yaml: not YAML: line 3, column 1: expected ',' or ']'",
        "spec.triggers.schedule: '61 * * * *' is not a cron schedule",
        "spec.targetFileSize: '12QQ' is not a positive size",
        "spec.maintenanceWindows[0].start: '25:00' is not a time of day as HH:MM",
        "TxnTable/default/t: spec.observeInterval: '0s' must be longer than zero",
    ):
        assert expected in said, said
    # no regular expression dumped: short lines, whatever the length of the path
    assert all(len(line.replace(str(manifests), "")) < 250 for line in lines), lines
    assert "[0-9]" not in captured.err and "^(" not in captured.err
    assert captured.out == ""


def test_a_name_taken_twice_in_one_namespace_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifests = tmp_path / "m"
    manifests.mkdir()
    (manifests / "one.yaml").write_text(_table("events", tmp_path / "a"))
    (manifests / "two.yaml").write_text(_table("events", tmp_path / "b"))
    assert main(["run", "--local", str(manifests), "--once"]) == 2
    err = capsys.readouterr().err
    assert "two.yaml: TxnTable/default/events: defined twice (first in" in err
    assert str(manifests / "one.yaml") in err


def test_names_are_unique_per_kind_and_namespace_only(tmp_path: Path) -> None:
    from txntable.cli.local_manifests import load_manifests

    manifests = tmp_path / "m"
    manifests.mkdir()
    (manifests / "a.yaml").write_text(_table("events", tmp_path / "a", namespace="a"))
    (manifests / "b.yaml").write_text(_table("events", tmp_path / "b", namespace="b"))
    (manifests / "p.yaml").write_text(
        "apiVersion: txntable.io/v1alpha1\nkind: CompactionPolicy\n"
        "metadata: {name: events, namespace: a}\nspec: {triggers: {smallFiles: 2}}\n"
    )
    loaded = load_manifests(manifests)
    assert loaded.errors == []
    assert sorted(t.metadata.namespaced_name for t in loaded.tables) == ["a/events", "b/events"]
    assert [p.metadata.name for p in loaded.compaction] == ["events"]


def test_one_manifest_file_is_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``run --local FILE`` was refused ("is not a directory")."""
    Table.create(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    manifest = tmp_path / "table.yaml"
    manifest.write_text(_table("events", tmp_path / "t"))
    argv = ["run", "--local", str(manifest), "--once", "--no-events"]
    assert main([*argv, "--runs-dir", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("default/events: phase=") and "version=0" in out


def test_the_watch_sees_manifest_edits_only(tmp_path: Path) -> None:
    """An edit, a new file and a removed one are changes; a run's directory appearing next to
    the manifests (``run --local .`` with the default ``--runs-dir``) is not."""
    from txntable.cli.local_manifests import ManifestWatch

    (tmp_path / "t.yaml").write_text(_table("t", tmp_path / "t"))
    watch = ManifestWatch(tmp_path)
    assert not watch.changed()
    (tmp_path / ".txntable-runs" / "default").mkdir(parents=True)
    (tmp_path / ".txntable-runs" / "default" / "request.json").write_text("{}")
    assert not watch.changed()
    (tmp_path / "t.yaml").write_text(_table("t", tmp_path / "t", interval="5m"))
    assert watch.changed() and not watch.changed()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "u.yml").write_text(_table("u", tmp_path / "u"))
    assert watch.changed()
    (tmp_path / "sub" / "u.yml").unlink()
    assert watch.changed()
