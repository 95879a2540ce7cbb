"""A stand-in job that runs out of memory, for the local launcher's OOM detection tests.

``--how limit``: the process caps its address space (``RLIMIT_AS``) and allocates past it, so
Python raises ``MemoryError`` and exits with its traceback, as a job whose bin does not fit does.
``--how kill``: the process gets SIGKILL, as from the kernel's OOM killer.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--how", choices=("limit", "kill"), required=True)
    args, _ = parser.parse_known_args()
    sys.stderr.write("oom job starting\n")
    sys.stderr.flush()
    if args.how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    with open("/proc/self/status") as fh:
        vm = next(int(ln.split()[1]) for ln in fh if ln.startswith("VmSize:")) * 1024
    limit = vm + 64 * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    hog = bytearray(256 * 1024 * 1024)  # past the limit: MemoryError
    return len(hog) * 0


if __name__ == "__main__":
    sys.exit(main())
