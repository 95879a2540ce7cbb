"""docs/install.md can be followed: every command block either runs here or is marked.

Blocks marked ``# needs a cluster`` or ``# needs docker`` talk to an API server or a container
engine and are left to the e2e suite (tests/e2e). Every other command is executed: ``helm
lint`` and ``helm template`` through Helm's own engine (helm-python-sdk, the same Go code as the
helm binary; output redirections land in a scratch directory), and ``kubernetes-validate``
through its own file validator, so a flag, value or path that stops working fails here.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml
from kubernetes_validate import utils as kv_utils

from tests.chart_docs import REPO
from tests.docblocks import blocks, commands
from tests.unit.chart_support import chart_copy

DOC = REPO / "docs" / "install.md"
MARKERS = ("# needs a cluster", "# needs docker")
CHART_ARG = "charts/txntable-operator"


class Shell:
    """The few commands install.md may run without a cluster, executed in-process."""

    def __init__(self, workdir: Path, chart_dir: Path) -> None:
        self.workdir = workdir
        self.chart_dir = chart_dir
        self.ran: list[str] = []

    def _values(self, words: list[str]) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
        """Merge -f/--values and --set like Helm (later wins); return options and positionals."""
        values: dict[str, Any] = {}
        opts: dict[str, Any] = {}
        rest: list[str] = []
        it = iter(words)
        for word in it:
            if word in ("-f", "--values"):
                values = _merge(values, yaml.safe_load((REPO / next(it)).read_text()) or {})
            elif word == "--set":
                values = _merge(values, helm_python.parse_set_string(next(it)))
            elif word in ("-n", "--namespace", "--kube-version"):
                opts[word.lstrip("-")] = next(it)
            elif word.startswith("--"):
                opts[word[2:]] = True
            else:
                rest.append(word)
        return values, opts, rest

    def _chart(self, arg: str) -> Path:
        assert arg == CHART_ARG, f"unexpected chart path {arg}"
        return self.chart_dir

    def run(self, line: str) -> None:
        words = shlex.split(line)
        out: Path | None = None
        if ">" in words:
            at = words.index(">")
            out, words = self.workdir / words[at + 1], words[:at]
        if words[:2] == ["helm", "lint"]:
            values, opts, rest = self._values(words[2:])
            report = helm_python.lint(self._chart(rest[0]), values, strict=bool(opts.get("strict")))
            assert report["errors"] == [], report
            assert [m for m in report["messages"] if m["severity"] >= 2] == []
        elif words[:2] == ["helm", "template"]:
            values, opts, rest = self._values(words[2:])
            release, chart_arg = rest
            chart = helm_python.Chart.load(self._chart(chart_arg))
            rendered = chart.render(values, name=release, namespace=opts.get("namespace"))
            docs = [v for k, v in sorted(rendered.items()) if not k.endswith("NOTES.txt")]
            if opts.get("include-crds"):
                docs = [c["data"] for c in chart.crds] + docs
            text = "\n---\n".join(docs)
            assert out is not None, "render to a file, then validate it"
            out.write_text(text)
        elif words[0] == "kubernetes-validate":
            assert "--strict" in words and words[words.index("-k") + 1] == "1.33"
            files = [w for w in words[1:] if w.endswith(".yaml")]
            assert files
            for name in files:
                rc = kv_utils.validate_file(str(self.workdir / name), "1.33", True, True, True)
                assert rc == 0, f"{name} failed validation"
        else:
            raise AssertionError(f"not runnable here and not marked: {line}")
        self.ran.append(words[0] + " " + words[1])


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Shell, int]:
    """Run every unmarked command of install.md once; return the shell and the marked count."""
    workdir = tmp_path_factory.mktemp("install")
    shell = Shell(workdir, chart_copy(workdir / "chart"))
    marked = 0
    for block in blocks(DOC.read_text()):
        lines = commands(block)
        assert lines, f"empty command block:\n{block}"
        if any(marker in block for marker in MARKERS):
            marked += 1
            continue
        for line in lines:
            shell.run(line)
    return shell, marked


def test_every_block_runs_or_is_marked(executed: tuple[Shell, int]) -> None:
    shell, marked = executed
    assert len(blocks(DOC.read_text())) >= 5
    assert marked >= 3
    assert {"helm lint", "helm template"} <= set(shell.ran)
    assert any(r.startswith("kubernetes-validate") for r in shell.ran)


def test_rendered_install_holds_what_the_doc_promises(executed: tuple[Shell, int]) -> None:
    shell, _ = executed
    rendered = (shell.workdir / "txntable-install.yaml").read_text()
    objects = [d for d in yaml.safe_load_all(rendered) if d]
    kinds = {o["kind"] for o in objects}
    assert {"CustomResourceDefinition", "Deployment", "KopfPeering", "Role"} <= kinds
    crds = {o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"}
    assert {"txntables.txntable.io", "kopfpeerings.kopf.dev"} <= crds
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    assert deployment["metadata"]["name"] == "txntable-operator"  # the name the doc uses
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["TXNTABLE_WATCH_NAMESPACES"] == "analytics"


def test_unmarked_cluster_commands_are_refused(tmp_path: Path) -> None:
    shell = Shell(tmp_path, chart_copy(tmp_path / "chart"))
    for line in ("kubectl apply -f x.yaml", "helm install a charts/txntable-operator"):
        with pytest.raises(AssertionError, match="not runnable"):
            shell.run(line)


def test_command_splitting() -> None:
    assert commands("# c\nhelm a \\\n  --b c\n\nx\n") == ["helm a    --b c", "x"]
