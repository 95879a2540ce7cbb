"""The README's main job: ``txntable demo`` and ``txntable run --local`` on a fresh directory.

Runs the real thing (writer processes, the controller loop, Spark in local mode) in a scratch
working directory so the repository's own demo-tables/ are never touched.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.conftest import REPO

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def txntable(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "txntable.cli.main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_demo_heals_a_table_fragmented_by_concurrent_writers(tmp_path: Path) -> None:
    shutil.copytree(REPO / "examples" / "local", tmp_path / "local")
    out = txntable(tmp_path, "demo", "--manifests", "local", "--writers", "1", "--appends", "6")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "healed:" in out.stdout
    table = DeltaTable(str(tmp_path / "demo-tables" / "events"))
    assert len(table.file_uris()) == 3  # one file per region
    assert table.to_pyarrow_table().num_rows == 12 * 150
    assert "OPTIMIZE" in [h["operation"] for h in table.history()]


def test_run_local_reports_a_missing_table(tmp_path: Path) -> None:
    # (invalid manifests stop the command before anything runs:
    # tests/unit/api/test_manifest_errors.py)
    manifests = tmp_path / "m"
    manifests.mkdir()
    (manifests / "t.yaml").write_text(
        "apiVersion: txntable.io/v1alpha1\nkind: TxnTable\nmetadata: {name: t}\n"
        "spec: {location: ./nowhere/t}\n"
    )
    out = txntable(tmp_path, "run", "--local", "m", "--once", "--json", "--interval", "0.1")
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout.strip().splitlines()[-1])["status"]
    reachable = {c["type"]: c for c in status["conditions"]}["Reachable"]
    assert reachable["status"] == "False"
    assert status["phase"] == "Unreachable"
    assert not (tmp_path / "nowhere").exists()  # observing never creates anything


def test_run_local_text_mode_says_why_a_table_is_not_ready(tmp_path: Path) -> None:
    manifests = tmp_path / "m"
    manifests.mkdir()
    (manifests / "t.yaml").write_text(
        "apiVersion: txntable.io/v1alpha1\nkind: TxnTable\nmetadata: {name: t}\n"
        "spec: {location: ./nowhere/t}\n"
    )
    out = txntable(tmp_path, "run", "--local", "m", "--once", "--interval", "0.1")
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("default/t:"))
    assert "phase=Unreachable" in line and "notReady=StorageUnreachable: no such" in line, line


def test_run_local_without_tables_is_a_clear_error(tmp_path: Path) -> None:
    out = txntable(tmp_path, "run", "--local", str(tmp_path), "--once")
    assert out.returncode == 2
    assert out.stderr.strip().startswith("error: no valid TxnTable manifest")
