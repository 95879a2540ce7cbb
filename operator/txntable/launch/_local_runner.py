"""Supervisor of one local run: start the job, wait for it, record its exit code atomically.

Run as a script (``python _local_runner.py RUN_DIR -- CMD...``), never imported: it uses the
standard library only, so it starts fast and does not load txntable. It is the leader of
the run's process group; because it, not the controller, waits for the job, the exit code
survives a controller restart (``exit.json`` appears once the job has ended).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: _local_runner.py RUN_DIR -- COMMAND...\n")
        return 2
    run_dir, command = argv[0], argv[2:]
    with (
        open(os.path.join(run_dir, "stdout.log"), "ab") as out,
        open(os.path.join(run_dir, "stderr.log"), "ab") as err,
    ):
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=err)

        def forward(signum: int, _frame: object) -> None:
            child.send_signal(signum)

        signal.signal(signal.SIGTERM, forward)
        signal.signal(signal.SIGINT, forward)
        code = child.wait()
    record = {"exitCode": code, "finished": datetime.now(UTC).isoformat()}
    tmp = os.path.join(run_dir, "exit.json.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(record, fh)
    os.replace(tmp, os.path.join(run_dir, "exit.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
