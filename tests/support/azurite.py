"""A container on Azurite (the blob_url fixture) and its option names, for the Azure tests."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from txntable.engine.storage.azure import AzureStorage
from txntable.engine.storage.azure_options import EMULATOR_ACCOUNT, EMULATOR_KEY

REPO = Path(__file__).resolve().parents[2]
CONTAINER = "txntable-tests"


def _azurite() -> str:
    found = os.environ.get("TXNTABLE_AZURITE") or shutil.which("azurite-blob")
    local = REPO / ".venv" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
    if found is None and local.exists():
        found = str(local)
    if found is None:
        pytest.fail("azurite-blob is missing: run make setup (it installs Azurite from npm)")
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def blob_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [
            _azurite(),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--location",
            str(tmp_path_factory.mktemp("azurite")),
            "--silent",
            "--skipApiVersionCheck",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            pytest.fail("Azurite did not start within 30 s")
        storage = AzureStorage(f"az://{CONTAINER}", _options(url))
        storage.client.create_container()
        yield url
    finally:
        # Azurite (Node) has been seen to outlive SIGTERM by more than 10 s on a loaded
        # machine, which failed a clean-clone `make test` at this teardown: kill it then
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _options(url: str) -> dict[str, str]:
    """object_store's names, as a delta-rs user writes them."""
    return {
        "AZURE_STORAGE_ACCOUNT_NAME": EMULATOR_ACCOUNT,
        "AZURE_STORAGE_ACCOUNT_KEY": EMULATOR_KEY,
        "AZURE_STORAGE_ENDPOINT": f"{url}/{EMULATOR_ACCOUNT}",
        "AZURE_ALLOW_HTTP": "true",
    }
