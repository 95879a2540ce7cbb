"""Read a table with deltalake in a child process: rows and a digest of their sorted contents.

deltalake can abort the interpreter at exit after reading, and its ``to_pyarrow_table`` refuses
deletion vectors; ``QueryBuilder`` applies them. Running it in a child keeps both problems out of
the test process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

_SCRIPT = """
import hashlib, json, sys
import deltalake
import pyarrow as pa
path, version, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
dt = deltalake.DeltaTable(
    path, version=None if version == "latest" else int(version), storage_options=options or None
)
batches = pa.table(deltalake.QueryBuilder().register("t", dt).execute("select * from t").read_all())
rows = sorted(json.dumps(r, sort_keys=True, default=str) for r in batches.to_pylist())
print(json.dumps({"rows": len(rows), "digest": hashlib.sha1("\\n".join(rows).encode()).hexdigest(),
                  "version": dt.version()}), flush=True)
"""


_MANY = """
import hashlib, json, sys
import deltalake
import pyarrow as pa
path, versions = sys.argv[1], json.loads(sys.argv[2])
out = {}
for version in versions:
    try:
        dt = deltalake.DeltaTable(path, version=version)
        q = deltalake.QueryBuilder().register("t", dt).execute("select * from t").read_all()
        rows = sorted(json.dumps(r, sort_keys=True, default=str) for r in pa.table(q).to_pylist())
        out[version] = {"rows": len(rows),
                        "digest": hashlib.sha1("\\n".join(rows).encode()).hexdigest()}
    except Exception as exc:
        out[version] = {"error": f"{type(exc).__name__}: {exc}"[:1000]}
print(json.dumps(out), flush=True)
"""


def _child(script: str, args: list[str], timeout: int, what: str) -> Any:
    """The last JSON line a deltalake child process prints; raises with its error otherwise."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise AssertionError(f"deltalake could not read {what}: {done.stderr[-800:]}")
    return json.loads(lines[-1])


def read_versions(path: Path | str, versions: list[int]) -> dict[int, dict[str, Any]]:
    """``{version: {"rows", "digest"} or {"error"}}`` for many versions in one child process."""
    found = _child(_MANY, [str(path), json.dumps(versions)], 600, str(path))
    return {int(k): v for k, v in found.items()}


def read(
    path: Path | str, version: int | None = None, storage_options: dict[str, str] | None = None
) -> dict[str, Any]:
    """``{"rows", "digest", "version"}`` as deltalake reads them (``storage_options`` in
    object_store's names, for object stores); raises with its error."""
    which = "latest" if version is None else str(version)
    args = [str(path), which, json.dumps(storage_options or {})]
    result: dict[str, Any] = _child(_SCRIPT, args, 300, f"{path}@{version}")
    return result
