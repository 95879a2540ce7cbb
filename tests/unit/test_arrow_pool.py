"""The Arrow pool is chosen by the kind of process (txntable.arrow_pool): real processes, since
pyarrow reads the choice once, when it is first imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import REPO
from txntable.arrow_pool import ONE_SHOT_POOL, VARIABLE

#: the pool a fresh interpreter ends with after the CLI's main() ran a command (one that fails at
#: once, on a path that does not exist: the choice is made before the command runs)
_PROBE = """
import json, sys
from txntable.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:  # --version
    pass
import pyarrow as pa
print(json.dumps(pa.default_memory_pool().backend_name))
"""


def _pool_after_cli(*args: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != VARIABLE}
    environ.update(env, PYTHONPATH=str(REPO / "operator"))
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        env=environ,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result: str = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_a_command_runs_with_the_one_shot_pool() -> None:
    assert _pool_after_cli("inspect", "/nonexistent") == ONE_SHOT_POOL


def test_the_controller_loop_keeps_pyarrows_default() -> None:
    default = _pool_after_cli("--version")  # ends in the parser: nothing chosen
    assert default != ONE_SHOT_POOL
    assert _pool_after_cli("run", "--local", "/nonexistent") == default


def test_a_pool_the_user_chose_wins() -> None:
    assert _pool_after_cli("inspect", "/nonexistent", **{VARIABLE: "jemalloc"}) == "jemalloc"
