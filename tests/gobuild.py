"""Go programs the tests run, built once per machine from pinned tools modules in ``tools/``.

Why this exists: no binary downloads, container engine or cluster are available here, so the
parts of a real cluster (kube-apiserver and etcd for the control-plane tests; kubelet,
containerd, CoreDNS, BuildKit, Helm and the Spark Operator for the real node) are built with Go
from the module proxy. Each ``tools/<name>/`` is a Go module with no Go code of ours: its
``go.mod`` names the mains as ``tool`` lines and pins every module in ``go.sum``.

A build lands in ``~/.cache/txntable/<label>-<hash>/bin`` (``TXNTABLE_CACHE_DIR`` moves the
cache), where ``<hash>`` is of that module's go.mod and go.sum and of the build's flags: a
change to any builds again into a new directory, and every version keeps its own. At most one
build runs at a time per machine (a file lock), and the result lands by an atomic rename, so
concurrent ``make`` runs never see half a binary. Tests only look (``GoTools.find``); the
``make`` targets build.
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
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOOLS = REPO / "tools"
#: where the binaries are cached (override with TXNTABLE_CACHE_DIR)
ENV_CACHE = "TXNTABLE_CACHE_DIR"


class MissingBinariesError(RuntimeError):
    """The binaries are not built on this machine yet."""


def cache_root() -> Path:
    base = os.environ.get(ENV_CACHE) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "txntable"
    )
    return Path(base)


def go() -> str:
    found = shutil.which("go") or (
        "/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").is_file() else None
    )
    if found is None:
        raise RuntimeError("Go (1.26 or newer) is needed to build the test tools: `go` not on PATH")
    return found


@dataclass(frozen=True)
class GoTools:
    """One tools module and the mains it builds.

    ``binaries`` maps each output name to its main package; ``label`` names the cache
    directory (usually with the pinned versions); ``ldflags`` are added to ``-s -w``;
    ``cgo`` builds with cgo (the default is static, as upstream releases are).
    """

    module: str
    label: str
    binaries: dict[str, str]
    ldflags: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    cgo: bool = False
    #: the make target that builds it, named when it is missing
    make_target: str = "test"
    #: extra environment of ``go build`` (e.g. GOTOOLCHAIN)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def dir(self) -> Path:
        return TOOLS / self.module

    def required(self, module: str) -> str:
        """The version this module's go.mod requires of ``module``."""
        for line in (self.dir / "go.mod").read_text().splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] == module:
                return words[1]
        raise RuntimeError(f"{self.dir / 'go.mod'} does not require {module}")

    def bin_dir(self) -> Path:
        digest = hashlib.sha256()
        for name in ("go.mod", "go.sum"):
            digest.update((self.dir / name).read_bytes())
        recipe = (sorted(self.binaries.items()), self.ldflags, self.tags, self.cgo)
        digest.update(repr(recipe).encode())
        return cache_root() / f"{self.label}-{digest.hexdigest()[:12]}" / "bin"

    def find(self) -> Path:
        """The bin directory holding every binary; ``MissingBinariesError`` says how to build."""
        found = self.bin_dir()
        if all((found / name).is_file() for name in self.binaries):
            return found
        raise MissingBinariesError(
            f"{', '.join(sorted(self.binaries))} not built at {found}: run "
            f"`make {self.make_target}` (builds them from the Go module proxy once per machine)"
        )

    def build(self, dest: Path) -> None:
        """Build every main into ``dest/out`` with a private copy of the module's files."""
        env = dict(os.environ)
        # go.sum is the pin: never let a GOFLAGS=-mod=mod in the caller's environment rewrite
        # it; no VCS stamping (the mains come from the module cache).
        env.update(GOFLAGS="-mod=readonly -buildvcs=false", GOWORK="off")
        env["CGO_ENABLED"] = "1" if self.cgo else "0"
        env.update(self.env)
        out = dest / "out"
        out.mkdir(parents=True)
        args = [go(), "build", "-trimpath", "-ldflags", " ".join(("-s -w", *self.ldflags))]
        if self.tags:
            args += ["-tags", ",".join(self.tags)]
        for name, package in sorted(self.binaries.items()):
            subprocess.run(
                [*args, "-o", str(out / name), package], cwd=self.dir, env=env, check=True
            )

    def ensure(self) -> Path:
        """The bin directory, built first when missing (one builder at a time per machine)."""
        target = self.bin_dir()
        try:
            return self.find()
        except MissingBinariesError:
            pass
        root = cache_root()
        root.mkdir(parents=True, exist_ok=True)
        with open(root / ".gobuild.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                return self.find()  # another build finished while we waited
            except MissingBinariesError:
                pass
            print(f"building {', '.join(sorted(self.binaries))} into {target}", file=sys.stderr)
            started = time.monotonic()
            with tempfile.TemporaryDirectory(dir=root, prefix=".build-") as tmp:
                self.build(Path(tmp))
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.rmtree(target, ignore_errors=True)
                (Path(tmp) / "out").rename(target)
            print(f"built in {time.monotonic() - started:.0f} s", file=sys.stderr)
        return self.find()


def kubernetes_ldflags(version: str) -> tuple[str, ...]:
    """Stamp a Kubernetes main with its release (else /version says v0.0.0-master)."""
    major, minor = version.lstrip("v").split(".")[:2]
    return (
        f"-X k8s.io/component-base/version.gitVersion={version}",
        f"-X k8s.io/component-base/version.gitMajor={major}",
        f"-X k8s.io/component-base/version.gitMinor={minor}",
    )


def main(argv: list[str]) -> int:
    """``python -m tests.gobuild NAME...``: build those tool sets, print their bin dirs."""
    from tests.controlplane.binaries import CONTROLPLANE
    from tests.node.binaries import NODE_TOOLS

    known = {t.module: t for t in (CONTROLPLANE, *NODE_TOOLS)}
    unknown = [name for name in argv if name not in known]
    if unknown or not argv:
        print(f"usage: python -m tests.gobuild {{{','.join(sorted(known))}}}...", file=sys.stderr)
        return 2
    for name in argv:
        print(known[name].ensure())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
