"""``make cluster``: the tests' control plane, started by hand for debugging.

Starts etcd and kube-apiserver as the tests do (``plane.ControlPlane``), optionally installs
the chart (``--chart``, the tests' values), writes an admin kubeconfig and prints its path, then
waits until Ctrl-C (or SIGTERM) and stops everything. Logs (including the audit log) are kept in
the printed directory. docs/testing-control-plane.md says how to use it.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import tempfile
import threading
from pathlib import Path

from tests.controlplane import binaries
from tests.controlplane.conftest import INSTALL_VALUES, RELEASE, SYSTEM_NAMESPACE
from tests.controlplane.controller import install_chart
from tests.controlplane.plane import ControlPlane


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make cluster", description=__doc__.splitlines()[0])
    parser.add_argument("--chart", action="store_true", help="install the chart as the tests do")
    parser.add_argument("--dir", type=Path, help="where to keep the kubeconfig and logs")
    args = parser.parse_args(argv)
    try:
        bin_dir = binaries.find()
    except binaries.MissingBinariesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    keep = args.dir or Path(tempfile.mkdtemp(prefix="txntable-cluster-"))
    plane = ControlPlane.start(
        bin_dir, Path(tempfile.mkdtemp(prefix="txntable-controlplane-")), keep / "logs"
    )
    try:
        kubeconfig = plane.kubeconfig(keep / "kubeconfig")
        if args.chart:
            install_chart(
                plane, keep, release=RELEASE, namespace=SYSTEM_NAMESPACE, values=INSTALL_VALUES
            )
            print(f"chart installed: release {RELEASE} in {SYSTEM_NAMESPACE}")
        print(f"kube-apiserver ready at {plane.url}")
        print(f"export KUBECONFIG={kubeconfig}")
        print(f"logs: {keep / 'logs'}  (Ctrl-C stops the control plane)", flush=True)
        done = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: done.set())
        with contextlib.suppress(KeyboardInterrupt):
            done.wait()
    finally:
        plane.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
