"""The live files of a table by replaying its JSON commits with plain dictionaries."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.deltagen import log
from txntable.engine.model.actions import AddFile, RemoveFile, parse_commit


def _json_replay(path: Path) -> dict[tuple[str, str | None], dict[str, Any]]:
    """Live adds by replaying the JSON commits with plain dictionaries (the protocol's rules)."""
    live: dict[tuple[str, str | None], dict[str, Any]] = {}
    for name in sorted(os.listdir(log(path))):
        if len(name) != 25 or not name.endswith(".json"):
            continue
        for action in parse_commit((log(path) / name).read_bytes()):
            if isinstance(action, AddFile):
                live[action.key] = action.to_json()
            elif isinstance(action, RemoveFile):
                live.pop(action.key, None)
    return live
