"""Generated artifacts of the Helm chart: the values reference and the chart's copy of the CRDs.

``docs/chart-values.md`` is rendered from the ``# --`` comments of the chart's values.yaml
(each documented key with its default and, where it sets one, the controller's environment
variable), and ``charts/txntable-operator/files/crds/`` holds byte copies of ``crds/``. Tests
check both are current; refresh them with ``python -m tests.chart_docs --write``.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "txntable-operator"
VALUES = CHART / "values.yaml"
DOC = REPO / "docs" / "chart-values.md"
CRDS = REPO / "crds"
CHART_CRDS = CHART / "files" / "crds"

_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.-]+):(?P<rest>.*)$")
_ENV = re.compile(r"^\((?P<env>TXNTABLE_[A-Z_]+)\)\s*")


@dataclass(frozen=True)
class Entry:
    """One documented value: dotted path, default (JSON), environment variable, description."""

    path: str
    default: str
    env: str
    description: str


def _lookup(values: dict[str, Any], path: str) -> Any:
    node: Any = values
    for part in path.split("."):
        node = node[part]
    return node


def parse_values(text: str) -> list[Entry]:
    """Documented keys of a values.yaml, in file order; raises ValueError on a stray comment."""
    values = yaml.safe_load(text) or {}
    entries: list[Entry] = []
    stack: list[tuple[int, str]] = []
    pending: list[str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("# --"):
            pending = [stripped[4:].strip()]
            continue
        if stripped.startswith("#"):
            if pending is not None:
                pending.append(stripped[1:].strip())
            continue
        match = _KEY.match(line)
        if not match or stripped.startswith("-"):
            continue
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match["key"]))
        if pending is None:
            continue
        path = ".".join(k for _, k in stack)
        description = " ".join(pending)
        pending = None
        env_match = _ENV.match(description)
        env = env_match["env"] if env_match else ""
        if env_match:
            description = description[env_match.end() :]
        if not description:
            raise ValueError(f"values.yaml:{number}: empty description for {path}")
        default = json.dumps(_lookup(values, path), separators=(", ", ": "))
        entries.append(Entry(path, default, env, description))
    return entries


def leaf_paths(values: Any, prefix: str = "") -> list[str]:
    """Dotted paths of every leaf (scalars, lists and empty maps)."""
    if isinstance(values, dict) and values:
        out: list[str] = []
        for key, value in values.items():
            out += leaf_paths(value, f"{prefix}.{key}" if prefix else str(key))
        return out
    return [prefix]


def undocumented(text: str) -> list[str]:
    """Leaves of values.yaml with no documented key at or above them."""
    documented = {e.path for e in parse_values(text)}
    missing = []
    for leaf in leaf_paths(yaml.safe_load(text)):
        parts = leaf.split(".")
        if not any(".".join(parts[:i]) in documented for i in range(1, len(parts) + 1)):
            missing.append(leaf)
    return missing


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_doc(entries: list[Entry]) -> str:
    """docs/chart-values.md."""
    lines = [
        "# Helm chart values",
        "",
        "<!-- Generated from charts/txntable-operator/values.yaml by"
        " `python -m tests.chart_docs --write`; tests/unit/deploy/test_chart_docs.py keeps it"
        " current. Edit the comments in values.yaml, not this file. -->",
        "",
        "Every value of the `txntable-operator` chart with its default. Values with an",
        "environment variable set that variable of the controller (docs/configuration.md",
        "describes each); `values.schema.json` checks types, ranges and enums on every",
        "`helm install`, `upgrade`, `template` and `lint`.",
        "",
        "| value | default | environment variable | description |",
        "|---|---|---|---|",
    ]
    for e in entries:
        env = f"`{e.env}`" if e.env else ""
        lines.append(f"| `{e.path}` | `{_cell(e.default)}` | {env} | {_cell(e.description)} |")
    return "\n".join(lines) + "\n"


def current_doc() -> str:
    return render_doc(parse_values(VALUES.read_text()))


def stale_crds() -> list[str]:
    """CRD files of the chart that differ from (or are missing in) crds/, and extra ones."""
    ours = {p.name: p.read_bytes() for p in CRDS.glob("*.yaml")}
    chart = {p.name: p.read_bytes() for p in CHART_CRDS.glob("*.yaml")}
    return sorted(n for n in ours.keys() | chart.keys() if ours.get(n) != chart.get(n))


def write() -> None:
    DOC.write_text(current_doc())
    CHART_CRDS.mkdir(parents=True, exist_ok=True)
    for stale in CHART_CRDS.glob("*.yaml"):
        stale.unlink()
    for crd in CRDS.glob("*.yaml"):
        shutil.copyfile(crd, CHART_CRDS / crd.name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the generated files")
    args = parser.parse_args(argv)
    if args.write:
        write()
        return 0
    problems = []
    if not DOC.exists() or DOC.read_text() != current_doc():
        problems.append(f"{DOC.relative_to(REPO)} is stale")
    problems += [f"chart CRD {n} differs from crds/" for n in stale_crds()]
    for problem in problems:
        sys.stderr.write(problem + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
