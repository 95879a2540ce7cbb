"""The settings document end to end: the controller's request for a CompactionPolicy starts the
optimize job, which reads the document and compacts a real table (deltalake as the oracle); a
human's flags plan the same run; a bad document is exit 2 and changes nothing.

The setting used is ``maxFilesPerBin``, the one added to show what adding a setting touches.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from tests.integration.optimize_helpers import fragmented_table, rows_multiset
from tests.unit.policy_support import compaction_args, compaction_policy

pytestmark = pytest.mark.integration


def _job(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "txntable.jobs.optimize", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        check=False,
    )


def _controller_args(location: Path, spec: dict[str, Any]) -> list[str]:
    """The job's arguments as the controller builds them, run in-process with Arrow (no JVM)."""
    args = list(compaction_args(compaction_policy(spec), str(location)))
    at = args.index("--master")
    del args[at : at + 2]
    args[args.index("--executor") + 1] = "arrow"
    return args


def test_the_controllers_document_drives_the_run(tmp_path: Path) -> None:
    path = fragmented_table(tmp_path / "t", commits=8, rows=10, partitioned=False)
    before = rows_multiset(path)
    args = _controller_args(path, {"maxFilesPerBin": 3, "minFileSize": "1Mi"})
    assert "--options-json" in args and "--max-files-per-bin" not in args
    done = _job(*args)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    # 8 small files, at most 3 per bin: bins of 3, 3 and 2 files, one output each
    assert (result["numFilesRemoved"], result["numFilesAdded"]) == (8, 3)
    assert rows_multiset(path) == before
    assert len(DeltaTable(str(path)).file_uris()) == 3


def test_flags_and_the_controllers_document_plan_the_same_run(tmp_path: Path) -> None:
    path = fragmented_table(tmp_path / "t", commits=8, rows=10, partitioned=True)
    spec = {"maxFilesPerBin": 2, "minFileSize": "1Mi", "targetFileSize": "1Mi"}
    controller = _job(*_controller_args(path, spec), "--dry-run")
    human = _job(
        str(path),
        *("--executor", "arrow", "--dry-run", "--json", "--max-files-per-bin", "2"),
        *("--min-file-size", "1Mi", "--target-size", "1Mi", "--max-bytes", "64Gi"),
    )
    assert controller.returncode == human.returncode == 0, controller.stderr + human.stderr
    planned = [json.loads(done.stdout.splitlines()[-1])["plan"] for done in (controller, human)]
    assert planned[0] == planned[1]
    assert planned[0]["policy"]["maxFilesPerBin"] == 2
    assert planned[0]["numBins"] > 0 and all(b["numFiles"] <= 2 for b in planned[0]["bins"])


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ('{"maxFilesPerBin": "3"}', "optimizeOptions.maxFilesPerBin: must be int"),
        ('{"maxFilesPerBin": 2, "minInputFiles": 3}', "max files per bin (2) must not be below"),
        ('{"maxFilesPerBn": 3}', "optimizeOptions.maxFilesPerBn: unknown setting"),
    ],
)
def test_a_bad_document_is_exit_2_and_changes_nothing(
    tmp_path: Path, document: str, message: str
) -> None:
    path = fragmented_table(tmp_path / "t", commits=3, rows=10, partitioned=False)
    log_before = sorted(os.listdir(path / "_delta_log"))
    done = _job(str(path), "--executor", "arrow", "--options-json", document)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert sorted(os.listdir(path / "_delta_log")) == log_before
