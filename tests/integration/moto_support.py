"""moto's S3/SQS server as a subprocess on a free loopback port, shared by the S3 tests."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def moto_server() -> Iterator[str]:
    """Start ``moto_server`` (the dev extra installs it), yield its URL once it answers, stop it."""
    server = shutil.which("moto_server", path=os.path.dirname(sys.executable))
    if server is None:
        pytest.fail("moto_server is missing: install the dev extra (pip install -e '.[dev]')")
    port = _free_port()
    proc = subprocess.Popen(
        [server, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"{url}/moto-api/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            pytest.fail("moto_server did not start within 15 s")
        yield url
    finally:
        proc.terminate()  # SIGKILL after 10 s: a teardown on a loaded machine must not fail
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
