"""The images of the real node, built from our Dockerfile by BuildKit and kept as OCI archives.

Why this exists: the e2e tier must run what users run, the two images of the repository's
``Dockerfile`` (``controller`` and ``spark``), and no registry can be reached here. So:

* the Dockerfile's ``PYTHON_IMAGE`` is replaced by a base made from Debian's packages:
  ``mmdebstrap`` writes a bookworm root file system with Python 3.11 (``base_rootfs``), and
  ``images/base.Dockerfile`` turns it into an image. BuildKit is given that image as a named
  context (``context:<PYTHON_IMAGE>=oci-layout://...``), the way BuildKit lets a build replace
  any ``FROM`` without a registry;
* buildkitd (runc worker, host network for the Dockerfile's ``pip install`` and ``apt-get``)
  and buildctl come from ``tools/buildkit``; the Dockerfile is read by BuildKit's own Dockerfile
  frontend (``--opt cmdline=`` keeps its ``# syntax=`` line from sending BuildKit to a
  registry for a frontend image);
* the images the node itself needs are built the same way from ``images/*.Dockerfile``: the
  pause sandbox, CoreDNS, moto's S3 server and the Spark Operator on our Spark image.

Every image lands as an OCI archive in ``~/.cache/txntable/images/`` under the name the chart
or the node uses; ``tests.node.cluster`` imports them into containerd. BuildKit keeps its layer
cache in ``~/.cache/txntable/buildkit``, so a rebuild after a code change redoes only the
layers that changed.

``python -m tests.node.images`` (``make images``) builds them all and prints their sizes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.controlplane.plane import stop_process
from tests.gobuild import REPO, cache_root
from tests.node import binaries

HERE = Path(__file__).resolve().parent / "images"
#: the chart's appVersion: the chart's default image tags
APP_VERSION = "0.1.0"
CONTROLLER_IMAGE = f"ghcr.io/txntable/txntable:{APP_VERSION}"
SPARK_IMAGE = f"ghcr.io/txntable/txntable-spark:{APP_VERSION}"
#: the name the base is given as PYTHON_IMAGE (never pulled: a named context)
BASE_IMAGE = "txntable.local/python:3.11-bookworm"
PAUSE_IMAGE = f"txntable.local/pause:{binaries.PAUSE_VERSION}"
COREDNS_IMAGE = "txntable.local/coredns:{version}"
MOTO_IMAGE = "txntable.local/moto:{version}"
SPARK_OPERATOR_IMAGE = "txntable.local/spark-operator:{version}"

#: Debian packages of the base, beside the minimal base (apt, dpkg, coreutils, bash)
BASE_PACKAGES = ("python3", "python3-venv", "python-is-python3", "ca-certificates", "passwd")
#: paths dpkg leaves out, as Debian's slim images do
BASE_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*",
                 "/usr/share/info/*")  # fmt: skip
#: the machine's own CA certificates (a TLS-inspecting egress proxy signs the registries'
#: certificates here): builds inside the images must trust them to reach PyPI
LOCAL_CAS = Path("/usr/local/share/ca-certificates")


def images_dir() -> Path:
    return cache_root() / "images"


def _run(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, check=True, text=True, **kwargs)  # type: ignore[call-overload,no-any-return]


# -- the Debian base ---------------------------------------------------------------------------


def _base_recipe() -> list[str]:
    hooks = [
        # the machine's CAs, so pip and apt inside the build reach their registries
        "if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then "
        'cp /usr/local/share/ca-certificates/*.crt "$1/usr/local/share/ca-certificates/"; fi; '
        'chroot "$1" update-ca-certificates',
        # pip and setuptools as the python images have them (under /usr/local, from Debian's
        # own wheels), and the interpreter not marked externally managed (PEP 668), as there
        'chroot "$1" sh -c \'pip=$(echo /usr/share/python-wheels/pip-*.whl); '
        "python3 $pip/pip install -q --no-index --break-system-packages "
        "$pip /usr/share/python-wheels/setuptools-*.whl'",
        'rm -f "$1"/usr/lib/python3.*/EXTERNALLY-MANAGED',
    ]
    args = ["mmdebstrap", "--variant=minbase", "--format=tar"]
    args += [f"--include={','.join(BASE_PACKAGES)}"]
    args += [f"--dpkgopt=path-exclude={p}" for p in BASE_EXCLUDES]
    args += ["--dpkgopt=path-include=/usr/share/doc/*/copyright"]
    args += [f"--customize-hook={h}" for h in hooks]
    return [*args, "bookworm"]


def base_rootfs() -> Path:
    """The base's root file system as a tar, made once per recipe and CA set."""
    digest = hashlib.sha256(json.dumps(_base_recipe()).encode())
    for ca in sorted(LOCAL_CAS.glob("*.crt")):
        digest.update(ca.read_bytes())
    target = images_dir() / f"rootfs-bookworm-{digest.hexdigest()[:12]}.tar"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    started = time.monotonic()
    _run([*_base_recipe(), str(partial), "http://deb.debian.org/debian"])
    partial.rename(target)
    print(f"base root file system in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return target


# -- BuildKit ----------------------------------------------------------------------------------


@dataclass
class BuildKit:
    """A running buildkitd (runc worker) and the buildctl that talks to it."""

    bin_dir: Path
    address: str
    process: subprocess.Popen[bytes]

    @classmethod
    @contextlib.contextmanager
    def running(cls) -> Iterator[BuildKit]:
        bin_dir = binaries.BUILDKIT.find()
        state = cache_root() / "buildkit"
        state.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="txntable-buildkit-") as run:
            address = f"unix://{run}/buildkitd.sock"
            log = open(state / "buildkitd.log", "ab")  # noqa: SIM115 - closed below
            args = [
                str(bin_dir / "buildkitd"),
                f"--root={state / 'root'}",
                f"--addr={address}",
                "--oci-worker=true",
                "--containerd-worker=false",
                "--oci-worker-snapshotter=overlayfs",
                # RUN steps reach PyPI and Debian as the host does (no CNI in the builder)
                "--oci-worker-net=host",
                "--oci-worker-gc-keepstorage=30000",
            ]
            env = dict(os.environ, PATH=f"{bin_dir}:{os.environ.get('PATH', '')}")
            proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
            kit = cls(bin_dir=bin_dir, address=address, process=proc)
            try:
                kit._wait()
                yield kit
            finally:
                stop_process(proc)
                log.close()

    def _wait(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("buildkitd exited: see ~/.cache/txntable/buildkit/buildkitd.log")
            done = subprocess.run(
                [str(self.bin_dir / "buildctl"), f"--addr={self.address}", "debug", "workers"],
                capture_output=True,
                check=False,
            )
            if done.returncode == 0:
                return
            time.sleep(0.3)
        raise RuntimeError("buildkitd did not answer within 60 s")

    def build(
        self,
        context: Path,
        dockerfile: Path,
        output: str,
        *,
        target: str | None = None,
        args: dict[str, str] | None = None,
        contexts: dict[str, tuple[Path, str]] | None = None,
    ) -> None:
        """Build ``dockerfile`` in ``context`` to ``output`` (a buildctl --output value).

        ``contexts`` maps an image name used in ``FROM`` to (OCI layout, manifest digest).
        """
        cmd = [
            str(self.bin_dir / "buildctl"), f"--addr={self.address}", "build",
            "--frontend=dockerfile.v0",
            f"--local=context={context}", f"--local=dockerfile={dockerfile.parent}",
            f"--opt=filename={dockerfile.name}",
            # the builder's own Dockerfile frontend, not one named by `# syntax=` (a registry)
            "--opt=cmdline=",
            f"--output={output}", "--progress=plain",
        ]  # fmt: skip
        if target:
            cmd.append(f"--opt=target={target}")
        for key, value in (args or {}).items():
            cmd.append(f"--opt=build-arg:{key}={value}")
        for n, (name, (layout, digest)) in enumerate((contexts or {}).items()):
            store = f"ctx{n}"
            cmd += [f"--oci-layout={store}={layout}"]
            cmd += [f"--opt=context:{name}=oci-layout://{store}@{digest}"]
        _run(cmd)


def _layout_digest(layout: Path) -> str:
    index = json.loads((layout / "index.json").read_text())
    return str(index["manifests"][0]["digest"])


# -- the images --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Built:
    name: str
    archive: Path

    @property
    def size(self) -> int:
        return self.archive.stat().st_size


def _oci_output(name: str, archive: Path) -> str:
    return f"type=oci,dest={archive},name={name}"


def build_all(kit: BuildKit) -> list[Built]:
    """Every image the node and the e2e tier need, as OCI archives named as they are used."""
    out = images_dir()
    out.mkdir(parents=True, exist_ok=True)
    built: list[Built] = []

    def archive(name: str) -> Path:
        return out / (name.replace("/", "_").replace(":", "@") + ".tar")

    with tempfile.TemporaryDirectory(prefix="txntable-images-") as tmp_name:
        tmp = Path(tmp_name)
        # the base, from Debian's packages, as an OCI layout the other builds name
        base_ctx = tmp / "base"
        base_ctx.mkdir()
        os.link(base_rootfs(), base_ctx / "rootfs.tar")
        base_layout = out / "base-layout"
        shutil.rmtree(base_layout, ignore_errors=True)
        kit.build(base_ctx, HERE / "base.Dockerfile",
                  f"type=oci,dest={base_layout},tar=false,name={BASE_IMAGE}")  # fmt: skip
        base = {BASE_IMAGE: (base_layout, _layout_digest(base_layout))}

        # our two images, from the Dockerfile as it is
        for target, name in (("controller", CONTROLLER_IMAGE), ("spark", SPARK_IMAGE)):
            kit.build(REPO, REPO / "Dockerfile", _oci_output(name, archive(name)),
                      target=target, args={"PYTHON_IMAGE": BASE_IMAGE}, contexts=base)  # fmt: skip
            built.append(Built(name, archive(name)))

        # what the node runs beside them
        pause_ctx = tmp / "pause"
        pause_ctx.mkdir()
        shutil.copy2(binaries.pause_binary(), pause_ctx / "pause")
        kit.build(pause_ctx, HERE / "pause.Dockerfile",
                  _oci_output(PAUSE_IMAGE, archive(PAUSE_IMAGE)))  # fmt: skip
        built.append(Built(PAUSE_IMAGE, archive(PAUSE_IMAGE)))

        coredns = COREDNS_IMAGE.format(version=binaries.COREDNS.required(binaries.COREDNS_MODULE))
        coredns_ctx = tmp / "coredns"
        coredns_ctx.mkdir()
        shutil.copy2(binaries.COREDNS.find() / "coredns", coredns_ctx / "coredns")
        kit.build(coredns_ctx, HERE / "coredns.Dockerfile", _oci_output(coredns, archive(coredns)))
        built.append(Built(coredns, archive(coredns)))

        import moto

        moto_image = MOTO_IMAGE.format(version=moto.__version__)
        empty = tmp / "empty"
        empty.mkdir()
        kit.build(empty, HERE / "moto.Dockerfile", _oci_output(moto_image, archive(moto_image)),
                  args={"BASE_IMAGE": BASE_IMAGE, "MOTO_VERSION": moto.__version__},
                  contexts=base)  # fmt: skip
        built.append(Built(moto_image, archive(moto_image)))

        # the Spark Operator on our Spark image (given as a layout of the archive just built)
        spark_layout = tmp / "spark-layout"
        spark_layout.mkdir()
        _run(["tar", "-xf", str(archive(SPARK_IMAGE)), "-C", str(spark_layout)])
        operator = SPARK_OPERATOR_IMAGE.format(
            version=binaries.SPARK_OPERATOR.required(binaries.SPARK_OPERATOR_MODULE)
        )
        op_ctx = tmp / "spark-operator"
        op_ctx.mkdir()
        shutil.copy2(binaries.SPARK_OPERATOR.find() / "spark-operator", op_ctx / "spark-operator")
        kit.build(op_ctx, HERE / "spark-operator.Dockerfile",
                  _oci_output(operator, archive(operator)), args={"SPARK_IMAGE": SPARK_IMAGE},
                  contexts={SPARK_IMAGE: (spark_layout, _layout_digest(spark_layout))})  # fmt: skip
        built.append(Built(operator, archive(operator)))
    return built


def main() -> int:
    started = time.monotonic()
    with BuildKit.running() as kit:
        built = build_all(kit)
    for image in built:
        print(f"{image.name}\t{image.size / 2**20:.0f} MiB\t{image.archive}")
    print(f"built in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
