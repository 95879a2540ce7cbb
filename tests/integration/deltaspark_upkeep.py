"""Our maintenance on a table delta-spark wrote, one step at a time, as a user runs it (issue 33.4).

``step`` runs one ``txntable`` command on the table and then holds the table to what every
reader of a ``file:`` table needs whatever the step did: Hadoop's ``LocalFileSystem`` in
delta-spark's JVM reads every file of the table (the log and the data; a checksum file that no
longer matches its file is refused), and no checksum file is left without its file. The stories
of issue 33.4 (streaming source, change data feed with deletion vectors, time travel and
RESTORE, row tracking with column mapping, escaped partition values, the Spark executor:
``test_deltaspark_stream_source.py`` and its siblings) share it, so each maintenance step of each
story gets that check (33.4 item 7).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.deltaspark.client import DeltaSpark
from tests.deltaspark.support import checksum_files, hadoop_refusals, txntable

#: the arguments each step takes in these stories: VACUUM with zero retention (``--force``), so it
#: deletes what OPTIMIZE replaced; log cleanup keeps a day (the tests age the log first)
ARGS: dict[str, tuple[str, ...]] = {
    "optimize": ("--executor", "arrow"),
    "checkpoint": (),
    "vacuum": ("--retention", "interval 0 hours", "--force"),
    "cleanup": ("--retention", "interval 1 days"),
}


def step(ds: DeltaSpark, path: Path, command: str, *args: str) -> dict[str, Any]:
    """``txntable COMMAND PATH ARGS`` (``ARGS[command]`` when none are given), which must exit 0;
    then Hadoop must read every file under ``path``. Returns the command's JSON result."""
    done = txntable(command, str(path), *(args or ARGS[command]))
    assert done.doc is not None, f"txntable {command}: no result line: {done.stdout[-2000:]}"
    refused = hadoop_refusals(ds, path)
    assert not refused, f"after {command}, Hadoop refuses {refused}"
    orphans = checksum_files(path)[1]
    assert not orphans, f"after {command}, checksum files without their file: {orphans}"
    return done.doc


def table_ref(path: Path) -> str:
    return f"delta.`{path}`"
