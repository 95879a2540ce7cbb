"""A stand-in maintenance job for the local launcher tests (the real jobs need Spark).

Prints a log line to stderr and, at the end, one JSON result line to stdout, like
``txntable.jobs.*``. Options make it fail, wait for a file, leave a grandchild behind, or
ignore SIGTERM (a job that does not stop when asked).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--exit", type=int, default=0)
    parser.add_argument("--wait-for", default=None, help="block until this file exists (30 s max)")
    parser.add_argument(
        "--grandchild-pid", default=None, help="start a sleeper, write its pid here"
    )
    parser.add_argument("--ignore-sigterm", action="store_true")
    args, rest = parser.parse_known_args()
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.stderr.write("echo job starting\n")
    sys.stderr.flush()
    if args.grandchild_pid:
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        with open(args.grandchild_pid + ".tmp", "w") as fh:
            fh.write(str(sleeper.pid))
        os.replace(args.grandchild_pid + ".tmp", args.grandchild_pid)
    deadline = time.monotonic() + 30
    while args.wait_for and not os.path.exists(args.wait_for) and time.monotonic() < deadline:
        time.sleep(0.02)
    result = {
        "runId": os.environ.get("TXNTABLE_RUN_ID"),
        "tableUri": os.environ.get("TXNTABLE_TABLE_URI"),
        "master": os.environ.get("TXNTABLE_SPARK_MASTER"),
        "storageOptions": json.loads(os.environ.get("TXNTABLE_STORAGE_OPTIONS", "{}")),
        "args": rest,
    }
    print("some log line on stdout", flush=True)
    print(json.dumps(result), flush=True)
    if args.exit:
        sys.stderr.write(f"echo job failing with {args.exit}\n")
    return args.exit


if __name__ == "__main__":
    sys.exit(main())
