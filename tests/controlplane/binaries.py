"""The control plane's binaries: upstream kube-apiserver and etcd, built once per machine.

Why this exists: the control-plane tests run the real Kubernetes API server, and no container
engine or binary download is available, so the two mains are built from the Go module proxy by
the tools module in ``tools/controlplane`` (its go.mod pins ``k8s.io/kubernetes`` with one
``replace`` per staging module, and etcd at the version Kubernetes pins). The result is cached
outside the checkout, in ``~/.cache/txntable/controlplane-<k8s>-etcd-<etcd>-<hash>/bin``: the
hash is of go.mod and go.sum, so a change of either builds again and every version keeps its
own directory. The build runs at most once at a time per machine (a file lock) and lands by an
atomic rename, so concurrent ``make test`` runs never see half a binary.

``python -m tests.controlplane.binaries`` (``make controlplane``) builds when missing and prints
the ``bin`` directory; the tests only look (``find()``), they never build (a cold build takes
about a quarter of an hour, past a test's timeout).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "tools" / "controlplane"
KUBE_MODULE = "k8s.io/kubernetes"
ETCD_MODULE = "go.etcd.io/etcd/server/v3"
#: where the binaries are cached (override with TXNTABLE_CACHE_DIR)
ENV_CACHE = "TXNTABLE_CACHE_DIR"
#: names of the two binaries in the cached bin directory
APISERVER, ETCD = "kube-apiserver", "etcd"


class MissingBinariesError(RuntimeError):
    """The binaries are not built on this machine yet."""


def _required(module: str) -> str:
    """The version go.mod requires of ``module``."""
    for line in (TOOLS / "go.mod").read_text().splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == module:
            return words[1]
    raise RuntimeError(f"{TOOLS / 'go.mod'} does not require {module}")


def versions() -> tuple[str, str]:
    """(Kubernetes version, etcd version) the tools module pins, e.g. ("v1.37.2", "v3.7.0")."""
    return _required(KUBE_MODULE), _required(ETCD_MODULE)


def cache_root() -> Path:
    base = os.environ.get(ENV_CACHE) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "txntable"
    )
    return Path(base)


def bin_dir() -> Path:
    """The cached bin directory for the pinned versions and this go.mod/go.sum."""
    kube, etcd = versions()
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        digest.update((TOOLS / name).read_bytes())
    return cache_root() / f"controlplane-{kube}-etcd-{etcd}-{digest.hexdigest()[:12]}" / "bin"


def find() -> Path:
    """The bin directory holding both binaries; ``MissingBinariesError`` says how to build them."""
    found = bin_dir()
    if all((found / name).is_file() for name in (APISERVER, ETCD)):
        return found
    raise MissingBinariesError(
        f"kube-apiserver and etcd are not built at {found}: run `make controlplane` "
        "(builds them from the Go module proxy; about 15 minutes on a cold machine)"
    )


def _go() -> str:
    found = shutil.which("go") or (
        "/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").is_file() else None
    )
    if found is None:
        raise RuntimeError(
            "Go (1.26 or newer) is needed to build the control plane: `go` not on PATH"
        )
    return found


def build(dest: Path) -> None:
    """Build both mains into ``dest`` (kube-apiserver and etcd), stamped with their versions."""
    kube, _ = versions()
    major, minor = kube.lstrip("v").split(".")[:2]
    ldflags = " ".join(
        [
            "-s -w",
            f"-X k8s.io/component-base/version.gitVersion={kube}",
            f"-X k8s.io/component-base/version.gitMajor={major}",
            f"-X k8s.io/component-base/version.gitMinor={minor}",
        ]
    )
    env = dict(os.environ)
    # go.sum is the pin: never let a GOFLAGS=-mod=mod in the caller's environment rewrite it;
    # no VCS stamping (the mains come from the module cache); static like upstream releases.
    env.update(GOFLAGS="-mod=readonly -buildvcs=false", GOWORK="off", CGO_ENABLED="0")
    out = dest / "out"
    out.mkdir(parents=True)
    args = [_go(), "build", "-trimpath", "-ldflags", ldflags, "-o", str(out) + os.sep]
    subprocess.run(
        [*args, f"{KUBE_MODULE}/cmd/kube-apiserver", ETCD_MODULE], cwd=TOOLS, env=env, check=True
    )
    (out / "server").rename(out / ETCD)  # etcd's main package is named "server"


def ensure() -> Path:
    """The bin directory, built first when missing (one builder at a time per machine)."""
    target = bin_dir()
    try:
        return find()
    except MissingBinariesError:
        pass
    target.parent.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent.parent / ".controlplane.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return find()  # another build finished while we waited
        except MissingBinariesError:
            pass
        kube, etcd = versions()
        print(f"building kube-apiserver {kube} and etcd {etcd} into {target}", file=sys.stderr)
        started = time.monotonic()
        with tempfile.TemporaryDirectory(dir=target.parent.parent, prefix=".build-") as tmp:
            build(Path(tmp))
            target.parent.mkdir(parents=True, exist_ok=True)
            (Path(tmp) / "out").rename(target)
        took = time.monotonic() - started
        print(f"built in {took:.0f} s", file=sys.stderr)
    return find()


if __name__ == "__main__":
    print(ensure())
