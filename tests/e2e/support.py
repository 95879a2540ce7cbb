"""What the e2e tests share: kubectl and helm as the cluster's admin, waiting, namespaces."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}


@dataclass
class Kube:
    """kubectl, helm and the API client of the real cluster, as its admin."""

    kubeconfig: Path
    bin_path: str
    api: Any
    namespaces: list[str] = field(default_factory=list)

    def run(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig), PATH=self.bin_path)
        out = subprocess.run(
            args, capture_output=True, text=True, env=env, input=input, timeout=timeout, check=False
        )
        if check and out.returncode != 0:
            raise AssertionError(
                f"{' '.join(args)} exited {out.returncode}:\n{out.stdout}\n{out.stderr}"
            )
        return out

    def kubectl(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.run("kubectl", *args, **kwargs)

    def helm(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.run("helm", *args, **kwargs)

    def get(self, *args: str) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.kubectl("get", *args, "-o", "json").stdout)
        return out

    def apply(self, *objects: dict[str, Any]) -> None:
        docs = "\n---\n".join(json.dumps(o) for o in objects)
        self.kubectl("apply", "-f", "-", input=docs)

    def namespace(self, name: str, labels: dict[str, str] | None = None) -> str:
        """Create ``name`` enforcing the restricted Pod Security level (plus ``labels``)."""
        self.apply(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": {**RESTRICTED, **(labels or {})}},
            }
        )
        self.namespaces.append(name)
        wait_until(
            f"ServiceAccount default in {name}",
            lambda: self.kubectl("-n", name, "get", "sa", "default", check=False).returncode == 0,
            timeout=60,
        )
        return name


def wait_until(what: str, check: Any, timeout: float = 120.0, every: float = 1.0) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            found = check()
            if found:
                return found
        except Exception as exc:
            last = exc
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")
