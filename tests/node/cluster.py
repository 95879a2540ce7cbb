"""A single-node Kubernetes cluster of upstream parts: the e2e tier's cluster, and ``make node-up``.

Why this exists: one place starts the whole cluster the same way for the e2e fixtures and for
a person debugging by hand: etcd and kube-apiserver (``tests.controlplane.plane``, opened to a
node), then the node (``tests.node.node``) with every image of ``tests.node.images``
imported. ``RealCluster.start`` returns when the Node is Ready and cluster DNS answers;
``stop`` removes every pod and stops every process, in that order.

``python -m tests.node.cluster`` starts it, writes an admin kubeconfig, prints where, and
waits for Ctrl-C (or SIGTERM), then stops everything.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from tests.controlplane import binaries as controlplane_binaries
from tests.controlplane.plane import ControlPlane
from tests.node import binaries
from tests.node.images import images_dir
from tests.node.node import Node, NodeIdentity

#: the prefix of a real cluster's work directory (its etcd and API server name it)
WORKDIR_PREFIX = "txntable-realcluster-"


def stop_leftover_planes() -> None:
    """SIGKILL the etcd and API server of a real cluster whose owner was killed before it could
    stop them (there is one real node per machine, so any such plane is a leftover)."""
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            cmdline = (pid_dir / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if f"/{WORKDIR_PREFIX}" in cmdline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(pid_dir.name), signal.SIGKILL)


def image_archives() -> list[Path]:
    """The OCI archives ``make images`` wrote; fails naming the command when there are none."""
    found = sorted(images_dir().glob("*.tar"))
    found = [p for p in found if not p.name.startswith("rootfs-")]
    if not found:
        raise binaries.MissingBinariesError(
            f"no images in {images_dir()}: run `make images` (builds them with BuildKit)"
        )
    return found


@dataclass
class RealCluster:
    """A running control plane and its one node."""

    plane: ControlPlane
    node: Node
    workdir: Path

    @classmethod
    def start(cls, logdir: Path) -> RealCluster:
        for tools in binaries.NODE_TOOLS:
            tools.find()
        archives = image_archives()
        stop_leftover_planes()
        identity = NodeIdentity.here()
        workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
        plane = ControlPlane.start(
            controlplane_binaries.find(), workdir / "plane", logdir, node=identity.access()
        )
        try:
            node = Node.start(plane, identity, archives, logdir)
        except BaseException:
            plane.stop()
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        return cls(plane=plane, node=node, workdir=workdir)

    def stop(self) -> None:
        try:
            self.node.stop()
        finally:
            self.plane.stop()
            shutil.rmtree(self.workdir, ignore_errors=True)

    def logs(self, lines: int = 40) -> str:
        parts = [self.plane.logs(lines)]
        for name in sorted(self.node.procs):
            parts.append(f"--- {name}\n{self.node.log(name, lines)}")
        return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make node-up", description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="where to keep the kubeconfig and logs")
    args = parser.parse_args(argv)
    keep = args.dir or Path(tempfile.mkdtemp(prefix="txntable-node-"))
    try:
        cluster = RealCluster.start(keep / "logs")
    except binaries.MissingBinariesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        kubeconfig = cluster.plane.kubeconfig(keep / "kubeconfig")
        print(f"node {cluster.node.identity.name} Ready at {cluster.node.identity.ip}")
        print(f"export KUBECONFIG={kubeconfig}")
        print(f"export PATH={binaries.KUBERNETES.find()}:{binaries.HELM.find()}:$PATH")
        print(f"logs: {keep / 'logs'}  (Ctrl-C stops the cluster)", flush=True)
        done = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: done.set())
        with contextlib.suppress(KeyboardInterrupt):
            done.wait()
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
