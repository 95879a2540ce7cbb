"""Supervisor of one local run: start the job, wait for it, record its exit code atomically.

Run as a script (``python _local_runner.py [--deadline S] RUN_DIR -- CMD...``), never
imported: it uses the standard library only, so it starts fast and does not load txntable.
It is the leader of the run's process group; because it, not the controller, waits for the
job, the exit code survives a controller restart (``exit.json`` appears once the job has
ended). With ``--deadline`` the job is terminated (then killed) when it runs longer, like a
Job's ``activeDeadlineSeconds``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime

GRACE_SECONDS = 10.0


def main(argv: list[str]) -> int:
    deadline: float | None = None
    if argv[:1] == ["--deadline"] and len(argv) > 1:
        deadline, argv = float(argv[1]), argv[2:]
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: _local_runner.py [--deadline S] RUN_DIR -- COMMAND...\n")
        return 2
    run_dir, command = argv[0], argv[2:]
    error = None
    with (
        open(os.path.join(run_dir, "stdout.log"), "ab") as out,
        open(os.path.join(run_dir, "stderr.log"), "ab") as err,
    ):
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=err)

        def forward(signum: int, _frame: object) -> None:
            child.send_signal(signum)

        signal.signal(signal.SIGTERM, forward)
        signal.signal(signal.SIGINT, forward)
        try:
            code = child.wait(timeout=deadline)
        except subprocess.TimeoutExpired:
            error = f"deadline of {deadline:g} s exceeded"
            child.terminate()
            try:
                code = child.wait(timeout=GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                child.kill()
                code = child.wait()
    record = {"exitCode": code, "finished": datetime.now(UTC).isoformat()}
    if error:
        record["error"] = error
    tmp = os.path.join(run_dir, "exit.json.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(record, fh)
    os.replace(tmp, os.path.join(run_dir, "exit.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
