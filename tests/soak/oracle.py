"""deltalake's view of a soak table, in a process of its own.

deltalake can abort the interpreter at exit after reading, so the driver never imports it: it
runs this module and reads one JSON line. For the latest version: the version, every id, and the
live file paths; for each requested version: whether deltalake can load it (and the error).
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    from deltalake import DeltaTable

    path, versions = sys.argv[1], [int(v) for v in sys.argv[2].split(",") if v]
    out: dict[str, object] = {}
    try:
        table = DeltaTable(path)
        out["latest"] = table.version()
        ids = table.to_pyarrow_table(columns=["id"]).column("id").to_pylist()
        out["ids"] = ids
    except Exception as exc:  # deltalake's own error types
        out["error"] = f"{type(exc).__name__}: {exc}"
    loaded: dict[str, str | None] = {}
    for version in versions:
        try:
            DeltaTable(path, version=version).file_uris()
            loaded[str(version)] = None
        except Exception as exc:
            loaded[str(version)] = f"{type(exc).__name__}: {exc}"[:300]
    out["versions"] = loaded
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
